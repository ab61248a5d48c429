from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SAMPLES
from tracegen import TraceBuilder

from tb_mfu_plugin.analysis import fmt
from tb_mfu_plugin.analysis.evidence.show import evidence_lines
from tb_mfu_plugin.analysis.report import SCHEMA_VERSION
from tb_mfu_plugin.cli import main
from tb_mfu_plugin.running.pipeline import analyze_path
from tb_mfu_plugin.trace.locate.files import uncompressed_size

SUMMARY_KEYS = {
    "steps",
    "step_time_us",
    "gpu_busy_share",
    "kernel_time_share",
    "memcpy_time_share",
    "sm_efficiency",
    "achieved_occupancy",
    "tensor_core_kernel_share",
    "h2d_bytes_per_step",
    "d2h_bytes_per_step",
    "d2d_bytes_per_step",
    "sync_count_per_step",
    "kernels_per_step",
    "flops_per_step",
    "mfu",
}


def _good(path: Path) -> Path:
    b = TraceBuilder()
    for i in range(3):
        b.step(i + 1, i * 100.0, 90)
        b.launch_kernel("gemm", i * 100.0 + 1, i * 100.0 + 10, 50)
    return b.write(path)


def _logdir(tmp_path: Path) -> Path:
    logdir = tmp_path / "logs"
    _good(logdir / "good" / "host_1.1700000000000.pt.trace.json.gz")
    bad = logdir / "broken" / "host_2.1700000000000.pt.trace.json.gz"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"\x1f\x8b\x08\x00garbage")
    empty = logdir / "empty" / "host_3.1700000000000.pt.trace.json"
    empty.parent.mkdir(parents=True)
    empty.write_bytes(b"")
    return logdir


def test_json_contract(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logdir = _logdir(tmp_path)
    assert main(["analyze", str(logdir), "--json"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["schema_version"] == SCHEMA_VERSION == 3
    runs = {r["name"]: r for r in report["runs"]}
    assert set(runs) == {"good", "broken", "empty"}
    (w,) = runs["good"]["workers"]
    assert {"name", "span", "file", "error", "device", "summary", "steps", "findings"} <= set(w)
    assert {"name", "peak_flops", "peak_source", "dtype"} <= set(w["device"])
    assert SUMMARY_KEYS <= set(w["summary"])
    assert w["summary"]["steps"] == 3 and len(w["steps"]) == 3
    assert {"step", "start_us", "dur_us", "gpu_busy_share"} <= set(w["steps"][0])
    assert w["error"] is None and w["span"] == "1700000000000"
    # every bad file: one line naming the file and the reason, while the good run is analysed
    (b,) = runs["broken"]["workers"]
    assert "gzip" in b["error"]
    (e,) = runs["empty"]["workers"]
    assert e["error"] == "empty file"
    lines = [ln for ln in err.splitlines() if ln.startswith("tb-mfu:")]
    assert len(lines) == 2 and all(("host_2" in ln) or ("host_3" in ln) for ln in lines)


def test_exit_nonzero_only_when_nothing_analysed(tmp_path: Path) -> None:
    logdir = _logdir(tmp_path)
    shutil.rmtree(logdir / "good")
    assert main(["analyze", str(logdir), "--json"]) == 1
    assert main(["analyze", str(tmp_path / "missing")]) == 2
    (tmp_path / "nothing").mkdir()
    assert main(["analyze", str(tmp_path / "nothing")]) == 2


def test_table_output_names_the_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(_good(tmp_path / "x.pt.trace.json.gz"))]) == 0
    out = capsys.readouterr().out
    for word in ("GPU busy", "SM efficiency", "Top 1 kernels", "gemm", "3 steps"):
        assert word in out


def test_table_output_of_a_distributed_run_shows_its_ranks(capsys: pytest.CaptureFixture[str]) -> None:
    """The tables of a real 2-GPU run end with its ranks side by side and the straggler the JSON
    names (the text view once crashed there: the escaped copy it prints holds the ranks as a dict)."""
    run = SAMPLES / "ddp_2gpu"
    assert main(["analyze", str(run), "--top", "1"]) == 0
    out = capsys.readouterr().out
    (report,) = analyze_path(str(run)).runs
    assert report.ranks is not None and report.ranks.straggler is not None
    assert f"ranks side by side (world size {report.ranks.world_size})" in out
    assert f"straggler: {report.ranks.straggler.worker}" in out
    for row in report.ranks.ranks:
        assert row.worker in out
    # the rank's communication and the clocks the ranks were aligned on
    assert "Communication (DDP)" in out and "Collectives per step" in out and "default_pg (2)" in out
    assert "clock shift" in out and "Clocks aligned on the ends of 16 collective calls" in out
    # one job, one MFU: under the ranks' table, and under the MFU of rank 0, which waited and reads low
    job = report.ranks.job
    assert job is not None and f"Job MFU: {fmt.pct(job.mfu)} (likely " in out
    assert f"{fmt.us(job.step_time_unprofiled_us)}, {job.worker}'s estimate, the shortest of the ranks'" in out
    waited = f"Job MFU: {fmt.pct(job.mfu)}, over every rank (the ranks' table): this rank's step without the profiler"
    assert out.count(waited) == 1  # rank 0's: rank 1's own MFU is the job's


def test_evidence_flag_prints_each_value_in_its_unit(capsys: pytest.CaptureFixture[str]) -> None:
    """``--evidence``: each finding's evidence under the findings, every value as the tab writes it
    (analysis.evidence.show: the label, then the value through its unit's formatter), the note last."""
    run = SAMPLES / "pageable_copy_loop"
    assert main(["analyze", str(run)]) == 0
    assert "Evidence of" not in capsys.readouterr().out
    assert main(["analyze", str(run), "--evidence"]) == 0
    out = capsys.readouterr().out
    (w,) = analyze_path(str(run)).runs[0].workers
    assert w.findings
    rows = {tuple(c.strip() for c in line.split("│")[1:3]) for line in out.splitlines() if line.count("│") == 3}
    for f in w.findings:
        assert f"Evidence of {f.id}" in out
        for line in evidence_lines(f.evidence):  # (words may wrap in a narrow table: the figures do not)
            assert line.unit in ("text", "shape") or (line.label, line.text) in rows, line
    pageable = next(f for f in w.findings if f.id == "pageable_memcpy")
    assert ("Bytes / step", fmt.nbytes(pageable.evidence.bytes_per_step)) in rows  # 84.0 MB, not a raw count


def test_interconnect_flag_sets_the_link(capsys: pytest.CaptureFixture[str]) -> None:
    run = SAMPLES / "ddp_2gpu"
    assert main(["analyze", str(run), "--json", "--interconnect", "PCIe 5 x16"]) == 0
    workers = json.loads(capsys.readouterr().out)["runs"][0]["workers"]
    for w in workers:
        c = w["communication"]
        assert c["link"] == "PCIe 5 x16" and c["link_gbps"] == 63.0 and c["link_source"] == "given (--interconnect)"
        (x,) = c["collectives"]
        assert x["link_peak_share"] == pytest.approx(x["busbw_gbps"] / 63.0)


def test_compare_puts_runs_side_by_side_by_strategy(capsys: pytest.CaptureFixture[str]) -> None:
    runs = [SAMPLES / r for r in ("ddp_2gpu", "fsdp2_2gpu", "tp_2gpu")]
    if not all(r.is_dir() for r in runs):
        pytest.skip("sample traces not available")
    assert main(["compare", *map(str, runs), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["strategies"]
    assert [(r["run"], r["strategy"], r["ranks"]) for r in rows] == [
        ("ddp_2gpu", ["DDP"], 2),
        ("fsdp2_2gpu", ["FSDP"], 2),
        ("tp_2gpu", ["TP"], 2),
    ]
    for r in rows:
        assert 0 < r["mfu_min"] <= r["mfu_mean"] <= r["mfu_max"] < 1 and r["step_time_us"] > 0
        assert 0 < r["exposed_communication_share"] < 1 and r["link"] == "NVLink 4"
    assert rows[2]["overlap_ratio"] == 0.0 < rows[0]["overlap_ratio"]  # TP's all-reduces never overlap
    assert main(["compare", *map(str, runs)]) == 0
    out = capsys.readouterr().out
    assert "Strategies side by side" in out and "FSDP" in out and "tp_2gpu" in out


def _digest(root: Path) -> dict[str, str]:
    """Every entry under root (directories too) with its content hash: nothing may be added or changed."""
    return {
        str(p.relative_to(root)): hashlib.sha1(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in root.rglob("*")
    }


def test_never_writes_into_a_read_only_logdir(tmp_path: Path) -> None:
    logdir = _logdir(tmp_path)
    before = _digest(logdir)
    for p in [logdir, *logdir.rglob("*")]:
        mode = p.stat().st_mode
        os.chmod(p, mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(logdir), "--json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["runs"]
    finally:
        for p in [logdir, *logdir.rglob("*")]:
            os.chmod(p, p.stat().st_mode | stat.S_IWUSR)
    # (as root the permission bits alone would not stop a write, so compare the tree too)
    assert _digest(logdir) == before


def test_analysis_needs_no_torch(tmp_path: Path) -> None:
    """The analysis runs on a laptop without torch: importing and running it never loads torch."""
    trace = _good(tmp_path / "x.pt.trace.json.gz")
    code = (
        "import sys; from tb_mfu_plugin.running.pipeline import analyze_path; "
        f"r = analyze_path({str(trace)!r}); assert r.runs[0].workers[0].error is None; "
        "print(sorted(m for m in ('torch', 'tensorboard') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_path_progress_follows_the_decoded_bytes_of_every_file() -> None:
    """The CLI's bar: analyze_path reports (run, worker, done, total) over all the files of a
    path, from 0 up to the sum of their decoded sizes, never backwards."""
    run = SAMPLES / "ddp_2gpu"
    files = sorted(run.glob("*.pt.trace.json.gz"))
    calls: list[tuple[str, str, int, int]] = []
    report = analyze_path(str(run), progress=lambda *a: calls.append(a))
    total = sum(uncompressed_size(str(f), f.stat().st_size) for f in files)
    assert len(files) == 2 and total > sum(f.stat().st_size for f in files)
    assert {c[3] for c in calls} == {total}
    done = [c[2] for c in calls]
    assert done[0] == 0 and done[-1] == total and done == sorted(done)
    assert {(c[0], c[1]) for c in calls} == {(r.name, w.name) for r in report.runs for w in r.workers}


def test_min_mfu_gate_for_ci(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _good(tmp_path / "x.pt.trace.json.gz")
    # a hand-made trace has no shapes: give the FLOPs and the peak; 3 steps of 90 µs
    flags = ["--flops-per-step", "9e7", "--peak-tflops", "1000"]  # 9e7 / 90e-6 s / 1e15 = 0.1 %
    assert main(["analyze", str(trace), "--json", *flags, "--min-mfu", "0.05"]) == 0
    assert main(["analyze", str(trace), "--json", *flags, "--min-mfu", "50"]) == 3
    assert "MFU 0.10 % is below --min-mfu 50.0 %" in capsys.readouterr().err


def test_min_mfu_gate_says_unknown_apart_from_below(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An MFU that could not be computed is its own outcome (4), never "n/a is below" (3); one
    worker below the gate still fails it as below (3), whatever the others."""
    run = SAMPLES / "low_sm_efficiency"  # real H200 trace with no FLOP count: MFU unknown
    capsys.readouterr()
    assert main(["analyze", str(run), "--json", "--min-mfu", "1"]) == 4
    err = capsys.readouterr().err
    assert "MFU is unknown, so --min-mfu 1.0 % cannot be checked" in err and "below" not in err
    impossible = _good(tmp_path / "imp" / "w.1700000000000.pt.trace.json.gz")
    assert main(["analyze", str(impossible), "--json", "--flops-per-step", "1e15", "--min-mfu", "1"]) == 4
    assert "MFU is impossible (above 100 %)" in capsys.readouterr().err
    # one run at 0.1 % (its FLOPs from a sidecar), one with MFU unknown
    both = tmp_path / "both"
    _good(both / "a" / "w.1700000000000.pt.trace.json.gz")
    (both / "a" / "tb_mfu.json").write_text('{"flops_per_step": 9e7}')
    shutil.copytree(run, both / "b")
    assert main(["analyze", str(both), "--json", "--peak-tflops", "1000", "--min-mfu", "50"]) == 3
    assert "is below --min-mfu 50.0 %" in capsys.readouterr().err
    assert main(["analyze", str(both), "--json", "--peak-tflops", "1000", "--min-mfu", "0.05"]) == 4
    err = capsys.readouterr().err
    assert "below" not in err and err.count("cannot be checked") == 1


def test_help_lists_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["analyze", "--help"], ["compare", "--help"]):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == 0
        out = capsys.readouterr().out
        assert "exit status:" in out
        assert "3  --min-mfu: a worker's MFU is below the threshold" in out
        assert "4  --min-mfu: no worker is below the threshold, but a worker's MFU is unknown" in out


def test_compare_reports_fixed_and_new_findings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from conftest import SAMPLES

    naive, sdpa = SAMPLES / "gpt_naive_attention", SAMPLES / "gpt_sdpa_fused"
    if not naive.is_dir():
        pytest.skip("sample traces not available")
    assert main(["compare", str(naive), str(sdpa), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["schema_version"] == 2 and body["matched_by"] == "order"  # one GPU each: no ranks
    (pair,) = body["ranks"]
    status = {c["id"]: c["status"] for c in pair["findings"]}
    assert status["naive_attention"] == "fixed" and status["unfused_optimizer"] == "fixed"
    assert pair["other"]["summary"]["mfu"] > 2 * pair["baseline"]["summary"]["mfu"]
    assert main(["compare", str(naive), str(sdpa)]) == 0
    out = capsys.readouterr().out
    assert "fixed" in out and "Compare (the one worker of each run)" in out and "Findings of the runs" in out


def test_compare_puts_every_rank_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    """Not rank 0 alone: each rank of a 2-GPU run beside the same rank of a 4-GPU run, the ranks the
    other run lacks listed with nothing beside them, each rank's figures its own worker's."""
    two, four = SAMPLES / "ddp_2gpu", SAMPLES / "ddp_4gpu"
    assert main(["compare", str(two), str(four), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["matched_by"] == "rank"
    assert [p["rank"] for p in body["ranks"]] == [0, 1, 2, 3]
    expected = {
        (run.name, w.name): w.summary.mfu
        for path in (two, four)
        for run in analyze_path(str(path)).runs
        for w in run.workers
        if w.summary is not None
    }
    for p in body["ranks"]:
        b, o = p["baseline"], p["other"]
        assert o["summary"]["mfu"] == expected[("ddp_4gpu", o["worker"])] and o["worker"] == f"rank{p['rank']}"
        if p["rank"] < 2:
            assert b["summary"]["mfu"] == expected[("ddp_2gpu", b["worker"])] and b["worker"] == f"rank{p['rank']}"
            assert p["findings"]
        else:
            assert b is None and p["findings"] == []
    assert [r["run"] for r in body["strategies"]] == ["ddp_2gpu", "ddp_4gpu"]
    assert main(["compare", str(two), str(four)]) == 0
    out = capsys.readouterr().out
    for rank in range(4):
        assert f"Compare rank {rank} (the same rank of each run)" in out
    assert out.count("(no such rank)") == 2 and "Findings of rank 1" in out and "Findings of rank 2" not in out


def test_thresholds_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = SAMPLES / "pageable_copy_loop"
    if not run.is_dir():
        pytest.skip("sample traces not available")
    assert main(["analyze", str(run), "--json"]) == 0
    ids = {f["id"] for f in json.loads(capsys.readouterr().out)["runs"][0]["workers"][0]["findings"]}
    assert "pageable_memcpy" in ids and "memcpy_bound" not in ids  # its copies are pageable_memcpy's
    high = ["--threshold", "pageable_min_bytes_per_step=1e12", "--threshold", "pageable_min_share=0.99"]
    assert main(["analyze", str(run), "--json", *high]) == 0
    ids = {f["id"] for f in json.loads(capsys.readouterr().out)["runs"][0]["workers"][0]["findings"]}
    # with pageable_memcpy off, the copies running with no kernel alongside are memcpy_bound's
    assert "pageable_memcpy" not in ids and "memcpy_bound" in ids
    assert main(["analyze", str(run), "--threshold", "no_such=1"]) == 2
    assert "unknown diagnosis threshold 'no_such'" in capsys.readouterr().err


def test_a_bad_sidecar_costs_its_figures_not_the_analysis(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    _good(run / "host_1.1700000000000.pt.trace.json.gz")
    (run / "tb_mfu.json").write_text("{not json")
    assert main(["analyze", str(run), "--json"]) == 0
    (w,) = json.loads(capsys.readouterr().out)["runs"][0]["workers"]
    assert w["error"] is None and w["summary"]["steps"] == 3
    assert any("tb_mfu.json" in n for n in w["notes"])
    (run / "tb_mfu.json").write_text('{"flops_per_step": 9e7}')
    assert main(["analyze", str(run), "--json", "--peak-tflops", "1000"]) == 0
    (w,) = json.loads(capsys.readouterr().out)["runs"][0]["workers"]
    assert w["flops"]["user_flops_per_step"] == 9e7 and w["summary"]["mfu_traced"] == pytest.approx(9e7 / 90e-6 / 1e15)
    # the headline is over the step estimated without the profiler's host cost (issue 33)
    step = w["summary"]["step_time_unprofiled_us"]
    assert step <= 90 and w["summary"]["mfu"] == pytest.approx(9e7 / (step * 1e-6) / 1e15)


def test_impossible_mfu_is_printed_as_impossible(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """3 steps of 90 µs on an H100 cannot hold 1 PFLOP each: "impossible", the cause, no figure."""
    run = _good(tmp_path / "run" / "w.1700000000000.pt.trace.json.gz").parent
    assert main(["analyze", str(run), "--flops-per-step", "1e15"]) == 0
    out = capsys.readouterr().out
    assert "impossible" in out and "likely cause: the FLOPs" in out
    assert main(["analyze", str(run), "--flops-per-step", "1e15", "--json"]) == 0
    (w,) = json.loads(capsys.readouterr().out)["runs"][0]["workers"]
    raw = w["flops"]["impossible"]["values"]["mfu"]
    assert raw > 1 and f"{100 * raw:.1f}" not in out and f"{100 * raw:.0f}" not in out  # never printed
    assert w["summary"]["mfu"] is None and "impossible_mfu" in w["flags"]
    assert w["flops"]["impossible"]["likely_cause"] == "flops"
    assert {"unknown_core_kernel_share", "cuda_core_matmul_kernel_share"} <= set(w["summary"])
    assert main(["compare", str(run), str(run), "--flops-per-step", "1e15"]) == 0
    assert "impossible" in capsys.readouterr().out


def test_graph_replays_are_shown(capsys: pytest.CaptureFixture[str]) -> None:
    """The real H200 CUDA-graph sample: one replay of 492 kernels a step, in the table and the JSON."""
    run = SAMPLES / "tiny_mlp_cuda_graph"
    if not run.is_dir():
        pytest.skip("sample not recorded")
    assert main(["analyze", str(run)]) == 0
    out = capsys.readouterr().out
    assert "CUDA graph replays: 1/step running 492 kernels" in out and "tiny_kernels_in_graphs" in out
    assert main(["analyze", str(run), "--json"]) == 0
    (w,) = json.loads(capsys.readouterr().out)["runs"][0]["workers"]
    assert (w["launches"]["graph_launches_per_step"], w["launches"]["graph_kernels_per_step"]) == (1, 492)


def test_tables_off_a_terminal_are_as_wide_as_they_need(tmp_path: Path) -> None:
    """Written to a pipe (a CI log), no header or figure is cut to "t…" at 80 columns."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.run(
        [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(SAMPLES / "ddp_2gpu"), "--top", "3"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    heads = [ln for ln in lines if ln.startswith("┃")]  # every table's header row
    assert heads and not [ln for ln in heads if "…" in ln]
    assert max(len(ln) for ln in lines) > 80
    for word in ("Tensor-core kernels", "SM efficiency", "Exposed comm / step", "clock shift"):
        assert any(word in ln for ln in heads), word
    # one line per figure row: the step's table has its header and its one row, each on one line
    (row,) = [ln for ln in lines if ln.startswith("│") and "%" in ln and ln.count("│") == 11][:1]
    # the first worker's MFU as the report has it (the steady state, the profiler's drag out), unrounded
    first = analyze_path(str(SAMPLES / "ddp_2gpu")).runs[0].workers[0]
    assert f"│ {fmt.mfu_text(first)} │" in row and "99.1 %" in row
    # and a long prose line is one line, never wrapped
    assert any(ln.startswith("device 0: NVIDIA H200") and "sparse halved))" in ln for ln in lines)


def test_each_bad_file_is_reported_once(tmp_path: Path) -> None:
    """One line on stderr naming the file and the reason, with the tables (which only say the
    worker was not analysed) as with --json."""
    logdir = _logdir(tmp_path)

    def run(*flags: str) -> tuple[str, str]:
        proc = subprocess.run(
            [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(logdir), *flags],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout, proc.stderr

    out, err = run()
    assert err.count("host_2.1700000000000.pt.trace.json.gz") == 1 and err.count("empty file") == 1
    assert "gzip" not in out and "empty file" not in out and out.count("not analysed: the reason is on stderr") == 2
    out, err = run("--json")
    assert err.count("host_2.1700000000000.pt.trace.json.gz") == 1 and err.count("empty file") == 1


def test_html_is_the_download_page_of_every_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--html FILE``: the offline page the tab downloads, built by the same code: the report
    ``--json`` prints and the /runs body of its runs inlined beside the tab's bundle, no network."""
    from html.parser import HTMLParser

    from tb_mfu_plugin.tensorboard.offline import BUNDLE, DATA_ID, script_safe_js

    logdir = tmp_path / "logs"
    for run in ("ddp_2gpu", "low_sm_efficiency"):
        shutil.copytree(SAMPLES / run, logdir / run)
    page = tmp_path / "out" / "report.html"
    page.parent.mkdir()
    assert main(["analyze", str(logdir), "--json", "--html", str(page)]) == 0
    out, err = capsys.readouterr()
    assert f"wrote {page} (2 runs)" in err

    class Scripts(HTMLParser):
        """Each <script>'s attributes and text, as the HTML tokenizer (a browser's) sees them."""

        found: list[tuple[dict[str, str | None], str]] = []
        inside = False

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.inside = tag == "script"
            if self.inside:
                self.found.append((dict(attrs), ""))

        def handle_endtag(self, tag: str) -> None:
            self.inside = False

        def handle_data(self, data: str) -> None:
            if self.inside:
                a, t = self.found[-1]
                self.found[-1] = (a, t + data)

    parser = Scripts()
    parser.feed(page.read_text(encoding="utf-8"))
    (data_attrs, data), (code_attrs, code) = parser.found
    assert data_attrs == {"type": "application/json", "id": DATA_ID} and code_attrs == {"type": "module"}
    assert code.encode() == script_safe_js(Path(BUNDLE).read_bytes())
    payload = json.loads(data)
    assert payload["report"] == json.loads(out)
    assert (payload["run"], payload["worker"]) == ("ddp_2gpu", 0)
    runs = payload["runs"]
    assert [r["name"] for r in runs["runs"]] == ["ddp_2gpu", "low_sm_efficiency"]
    assert {r["state"] for r in runs["runs"]} == {"ready"} and runs["scanned"] and not runs["uploads"]["enabled"]
    ddp = runs["runs"][0]
    assert [w["name"] for w in ddp["workers"]] == ["rank0", "rank1"]
    assert [s["devices"] for w in ddp["workers"] for s in w["spans"]] == [[0], [1]]
    # a page that cannot be written: one line, status 1
    assert main(["analyze", str(logdir / "ddp_2gpu"), "--html", str(tmp_path / "no" / "such" / "x.html")]) == 1
    assert "cannot write the HTML report" in capsys.readouterr().err


def test_the_command_ends_without_teardown_yet_loses_nothing(tmp_path: Path) -> None:
    """``tb-mfu`` (``cli.run``) leaves with ``os._exit`` rather than free its reports: its output
    is still whole, its status the command's, and the exit handlers (temporary files',
    multiprocessing's) still run."""
    run = SAMPLES / "ddp_2gpu"
    marker = tmp_path / "atexit_ran"
    code = (
        "import atexit, pathlib, sys; from tb_mfu_plugin.cli import run; "
        f"atexit.register(pathlib.Path({str(marker)!r}).write_text, 'yes'); "
        "sys.argv[1:] = sys.argv[1:]; run()"
    )
    proc = subprocess.run([sys.executable, "-c", code, "analyze", str(run), "--json"], capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.endswith(b"}\n") and json.loads(proc.stdout)["runs"][0]["workers"]
    assert marker.read_text() == "yes"
    missing = subprocess.run(
        [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(tmp_path / "nope")], capture_output=True, timeout=120
    )
    assert missing.returncode == 2 and b"no such file or directory" in missing.stderr
    gate = subprocess.run(
        [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(run), "--min-mfu", "99"],
        capture_output=True,
        timeout=300,
    )
    assert gate.returncode == 3, gate.stderr  # a worker below the gate


def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    """``tb-mfu analyze --json | head -c 100``: status 1 and no traceback on stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(SAMPLES / "ddp_2gpu")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(100)
    proc.stdout.close()  # before the tables are all written: the pipe holds far less than they are
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 1
    assert b"Traceback" not in err and b"BrokenPipeError" not in err, err


def test_a_folder_of_other_json_traces_says_what_it_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A folder with no ``*.pt.trace.json[.gz]`` but HTA-style ``rank-0.json.gz`` files: status 2
    and one line saying how many other JSON files are there and how to read one; the sidecar
    and a file named directly are not in the count."""
    folder = tmp_path / "hta_style"
    folder.mkdir()
    for rank in (0, 1):
        _good(tmp_path / "t.pt.trace.json.gz").rename(folder / f"rank-{rank}.json.gz")
    (folder / "tb_mfu.json").write_text('{"flops_per_step": 1e12}')
    (folder / "odd\nname.json").write_text("{}")
    assert main(["analyze", str(folder)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith(
        "no trace files (*.pt.trace.json[.gz]) found; 3 other JSON files (odd\\nname.json, rank-0.json.gz "
        "and 1 more): name one to analyse it"
    ), line
    assert main(["analyze", str(folder / "rank-1.json.gz"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"][0]["workers"][0]["summary"]["steps"] == 3
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["analyze", str(empty)]) == 2
    assert capsys.readouterr().err.strip().endswith("no trace files (*.pt.trace.json[.gz]) found")
