"""The critical path of each step, and re-timing the step with a change applied (issue 26).

``graph`` builds the dependency graph of a device's steps as arrays, ``timing`` re-times it,
``path`` walks each step's critical path and sums it by class (``classes``)."""
