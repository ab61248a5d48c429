"""The test-only environment variable of the MFU tab (every other is in ``running.flags``)."""

# TEST ONLY: seconds by which each analysed file is published later than the one before
# (the k-th to finish waits k times this), so a browser test sees a run half loaded. Never set it in use.
TEST_STAGGER_ENV = "TB_MFU_TEST_STAGGER_S"
