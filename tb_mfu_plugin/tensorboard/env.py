"""The environment variables the MFU tab reads, each named once.

A leaf module (it imports nothing), so ``entry``, which TensorBoard imports for
every command, can name them in its flags' help at no cost.
"""

# The disk cache's folder ("none", "off" or empty: no disk cache); --mfu_cache_dir wins over it.
CACHE_DIR_ENV = "TB_MFU_CACHE_DIR"
# How many threads analyse files at once (default 1).
WORKERS_ENV = "TB_MFU_WORKERS"
