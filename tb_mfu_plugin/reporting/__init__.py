"""The report of a device, of a trace and of a run, built once: the analysis' stages, then the
diagnosis over them, then the run-level view of the ranks (``device.py``, ``trace.py``,
``run.py``). Pure, like the layers below it: ``running`` reads the files and calls it."""
