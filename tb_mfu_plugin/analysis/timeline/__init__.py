"""The timeline of one representative step (issue 36; docs/timeline.md): lanes of host threads,
GPU streams, copies and idle, the critical path and the findings pinned to their moments
(``block.timeline_block``; the report's types in ``types``)."""
