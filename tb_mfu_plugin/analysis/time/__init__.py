"""Steps and time: intervals, step windows, host windows and other evidence, idle gaps, syncs, copies, graphs."""
