"""Tests of the TensorBoard plugin (``tb_mfu_plugin.tensorboard``)."""
