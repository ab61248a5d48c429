"""Traces inside ``.zip`` and ``.tar(.gz)`` archives, read member by member under caps."""
