"""The tab's analysis flags come from the options table the CLI's come from, and change its reports
as the CLI's do (``running/flags.py``)."""

from __future__ import annotations

import json
import os

from tb_mfu_plugin.analysis.report import to_json
from tb_mfu_plugin.cli.main import build_parser
from tb_mfu_plugin.running.flags import CLI, analysis_options, resolve
from tb_mfu_plugin.running.pipeline import analyze_path

from .conftest import RUN_A

A100 = "NVIDIA A100-SXM4-80GB"


def test_the_device_name_flag_changes_the_tabs_report_as_the_clis(serve, two_runs):
    plain = serve(two_runs, workers="1")
    plain.settle()
    before = plain.json(f"/report?run={RUN_A}")["workers"][0]["device"]
    s = serve(two_runs, device_name=A100, tf32=True, workers="1")
    s.settle()
    after = s.json(f"/report?run={RUN_A}")
    device = after["workers"][0]["device"]
    assert "H200" in before["name"] and device["peak_source"] != before["peak_source"]
    assert "A100" in device["peak_source"] and device["peak_flops"] < before["peak_flops"]
    # the report the CLI makes with the same options, paths as the tab shows them
    args = build_parser().parse_args(["analyze", str(two_runs), "--device-name", A100, "--tf32"])
    options = analysis_options(resolve(args, CLI))
    text = to_json(analyze_path(str(two_runs), options)).decode()
    text = text.replace(json.dumps(os.path.abspath(two_runs) + "/")[1:-1], "")
    (expected,) = [r for r in json.loads(text)["runs"] if r["name"] == RUN_A]
    assert after == expected
