"""Layer 5, running analyses: files in, reports out (``pipeline``), here, in local processes or on Dask."""
