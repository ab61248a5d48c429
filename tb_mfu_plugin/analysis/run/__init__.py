"""Analysis of a run's workers together: the strategies table and the comparison of runs."""
