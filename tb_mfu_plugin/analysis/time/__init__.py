"""Steps and time: the interval toolkit, step windows, idle gaps, syncs, copies, op nesting, graphs."""
