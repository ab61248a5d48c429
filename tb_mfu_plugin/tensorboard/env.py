"""The environment variables the MFU tab reads, each named once.

A leaf module (it imports nothing), so ``entry``, which TensorBoard imports for
every command, can name them in its flags' help at no cost.
"""

# The disk cache's folder ("none", "off" or empty: no disk cache); --mfu_cache_dir wins over it.
CACHE_DIR_ENV = "TB_MFU_CACHE_DIR"
# How many processes analyse files at once (default: the usable cores, at most 8); --mfu_workers wins.
WORKERS_ENV = "TB_MFU_WORKERS"
# A Dask scheduler to analyse on (tcp://host:8786, or "local"); --mfu_scheduler wins.
SCHEDULER_ENV = "TB_MFU_SCHEDULER"
# The disk cache's cap in bytes (K, M, G suffixes; default 2G); --mfu_cache_max_bytes wins.
CACHE_MAX_BYTES_ENV = "TB_MFU_CACHE_MAX_BYTES"
# TEST ONLY: seconds by which each analysed file is published later than the one before
# (the k-th to finish waits k times this), so a browser test sees a run half loaded. Never set it in use.
TEST_STAGGER_ENV = "TB_MFU_TEST_STAGGER_S"
