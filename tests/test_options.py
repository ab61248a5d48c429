"""One options table (``running/flags.py``) for both faces: the CLI and the TensorBoard plugin have
the same analysis options, generated from it, read the same way, with one environment variable
and one default each; docs/options.md is the table."""

from __future__ import annotations

import argparse
import dataclasses
import runpy
from pathlib import Path

import pytest

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.cli.main import build_parser
from tb_mfu_plugin.running import flags as F
from tb_mfu_plugin.tensorboard.entry import MfuPluginLoader
from tb_mfu_plugin.trace.limits import Limits

ROOT = Path(__file__).resolve().parent.parent
# The flags each face has of its own, outside the table (what it prints; the tab's sources and users).
CLI_ONLY = {"-h", "--help", "--json", "--html", "--top", "--evidence", "--min-mfu", "--out", "--replace"}
PLUGIN_ONLY = {
    "--mfu_logdir_spec",
    "--mfu_tensorboard_reads_urls",
    "--mfu_show_full_paths",
    "--mfu_confine_to_logdir",
    "--mfu_disable_upload",
    "--mfu_upload_max_bytes",
    "--mfu_upload_idle_seconds",
    "--mfu_allowed_hosts",
}


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings} - {"-h", "--help"}


def _cli_parser(command: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


def _plugin_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    MfuPluginLoader().define_flags(parser)
    return parser


def test_the_cli_and_the_plugin_have_the_same_analysis_options_from_one_table() -> None:
    plugin = _plugin_parser()
    by_plugin_flag = {o.plugin_flag: o.name for o in F.OPTIONS if o.plugin_flag}
    plugin_names = {by_plugin_flag[f] for f in _flags(plugin) - PLUGIN_ONLY}  # KeyError: a flag not from the table
    for command in ("analyze", "compare", "export-scalars"):
        cli = _cli_parser(command)
        by_cli_flag = {f: o.name for o in F.OPTIONS if o.cli_flag for f in (o.cli_flag, *o.aliases)}
        cli_names = {by_cli_flag[f] for f in _flags(cli) - CLI_ONLY}
        shared = {o.name for o in F.OPTIONS if o.sets != F.CACHE}  # the tab's disk cache is the tab's
        assert cli_names == plugin_names - {o.name for o in F.OPTIONS if o.sets == F.CACHE} == shared, command
    # every field of the analysis's options and every cap is some option's
    analysis = {f.name for f in dataclasses.fields(AnalysisOptions)} - {"limits", "top_kernels"}
    assert analysis == {o.dest for o in F.OPTIONS if o.sets == F.ANALYSIS}
    assert {f.name for f in dataclasses.fields(Limits)} == {o.dest for o in F.OPTIONS if o.sets == F.LIMITS}


def test_both_faces_read_the_same_options_into_the_same_analysis_options() -> None:
    given = {
        "peak_tflops": "400",
        "device_name": "H100 SXM",
        "flops_per_step": "2e12",
        "interconnect": "NVLink 4",
        "max_trace_bytes": "512M",
        "max_seconds": "0",
    }
    cli_args = ["analyze", "x", "--tf32", "--threshold", "memcpy_bound_share=0.2", "--tensor-core-pattern", "mma"]
    plugin_args = ["--mfu_tf32", "--mfu_threshold", "memcpy_bound_share=0.2", "--mfu_tensor_core_pattern", "mma"]
    for name, value in given.items():
        cli_args += [F.BY_NAME[name].cli_flag or "", value]
        plugin_args += [F.BY_NAME[name].plugin_flag or "", value]
    from_cli = F.analysis_options(F.resolve(build_parser().parse_args(cli_args), F.CLI, {}))
    from_plugin = F.analysis_options(F.resolve(_plugin_parser().parse_args(plugin_args), F.PLUGIN, {}))
    assert from_cli == from_plugin
    assert (from_cli.peak_tflops, from_cli.tf32, from_cli.limits.max_trace_bytes) == (400.0, True, 512 << 20)
    assert from_cli.thresholds == (("memcpy_bound_share", 0.2),) and from_cli.tensor_core_patterns == ("mma",)
    # nothing given: the table's defaults, the analysis's own
    assert F.analysis_options(F.resolve(build_parser().parse_args(["analyze", "x"]), F.CLI, {})) == AnalysisOptions()


def test_workers_is_one_option_with_one_variable_and_the_old_names() -> None:
    parse = build_parser().parse_args
    assert F.resolve(parse(["analyze", "x"]), F.CLI, {})["workers"] is None  # None: default_workers()
    assert F.resolve(parse(["analyze", "x"]), F.CLI, {F.WORKERS_ENV: "3"})["workers"] == 3
    for old in (["--jobs", "2"], ["-j", "2"], ["--workers", "2"]):  # --jobs, -j: the CLI's name before
        assert F.resolve(parse(["analyze", "x", *old]), F.CLI, {F.WORKERS_ENV: "3"})["workers"] == 2  # flag wins
    plugin = _plugin_parser().parse_args(["--mfu_workers", "5"])
    assert F.resolve(plugin, F.PLUGIN, {F.WORKERS_ENV: "3"})["workers"] == 5
    with pytest.raises(ValueError, match=r"\$TB_MFU_WORKERS expects a positive integer"):
        F.resolve(parse(["analyze", "x"]), F.CLI, {F.WORKERS_ENV: "0"})
    with pytest.raises(SystemExit):
        parse(["analyze", "x", "--jobs", "0"])


def test_docs_options_is_the_table() -> None:
    gen = runpy.run_path(str(ROOT / "scripts" / "gen_options.py"))
    assert (ROOT / "docs" / "options.md").read_text(encoding="utf-8") == gen["page"](), (
        "stale docs/options.md: run python scripts/gen_options.py"
    )
