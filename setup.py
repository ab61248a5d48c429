"""The optional compiled decoder (tb_mfu_plugin/trace/decode/_kineto.c): built where a C compiler
and Python's headers are present, skipped otherwise (``optional=True``). Without it the trace
decoder runs its msgspec path alone, with the same results (trace/decode/fast.py)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tb_mfu_plugin.trace.decode._kineto",
            ["tb_mfu_plugin/trace/decode/_kineto.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
