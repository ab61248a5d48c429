"""A teammate's runs in an S3 bucket, in a real TensorBoard and a real headless Chromium.

The bucket is moto's S3 API on loopback; the credentials are only in a storage options file
(``$TB_MFU_STORAGE_OPTIONS``), never in the environment. TensorBoard runs with
``--logdir_spec mine:LOCAL,theirs:s3://...``; the tab must show the remote runs with the
figures ``tb-mfu analyze s3://... --json`` gives for the same objects, which are those of the
same files on local disk, and the secret must appear nowhere the user can see.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from located import sample_logdir

from .conftest import ROOT, TensorBoard, _skip_without_browser
from .test_browser import FRAME, TIMEOUT_MS, check_overview_matches_cli, cli_json

pytest.importorskip("s3fs", reason="the S3 test needs the [s3] extra (s3fs)")
pytest.importorskip("moto.server", reason="the S3 test needs moto[server]")

from s3_server import SECRET, Bucket, CountingMotoServer, env_without_aws  # noqa: E402

pytestmark = pytest.mark.e2e

# A run with a sidecar (its user FLOPs are read from the bucket too) and a real 2-GPU run.
REMOTE_RUNS = ("low_sm_efficiency", "ddp_2gpu")
LOCAL_RUN = "pageable_copy_loop"


class Team:
    """The bucket, the local folder beside it, and the environment both tools run with."""

    def __init__(self, root: Path, server: CountingMotoServer) -> None:
        self.local = sample_logdir(root / "remote-src", REMOTE_RUNS)
        self.mine = sample_logdir(root / "mine", (LOCAL_RUN,))
        self.bucket = Bucket(server, root / "storage_options.json")
        self.bucket.upload_dir(self.local, "team/logs")
        self.env = {**env_without_aws(root), "TB_MFU_STORAGE_OPTIONS": str(self.bucket.options_file)}

    @property
    def url(self) -> str:
        return self.bucket.url("team/logs")

    def cli(self, location: str) -> dict[str, Any]:
        """``tb-mfu analyze LOCATION --json`` by run name, with the team's environment."""
        merged = {**os.environ, **self.env, "TB_MFU_CACHE_DIR": ""}
        env = {k: v for k, v in merged.items() if v is not None}
        out = subprocess.run(
            [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", location, "--json"],
            check=True,
            capture_output=True,
            cwd=ROOT,
            env=env,
        )
        assert SECRET not in out.stdout.decode() + out.stderr.decode()
        return {r["name"]: r for r in json.loads(out.stdout)["runs"]}


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    _skip_without_browser()
    server = CountingMotoServer()
    server.start()
    try:
        yield Team(tmp_path_factory.mktemp("team"), server)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def tb(team: Team, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TensorBoard]:
    server = TensorBoard(f"mine:{team.mine},theirs:{team.url}", tmp_path_factory.mktemp("cache"), env=team.env)
    try:
        server.wait_analysed()
        yield server
    finally:
        server.stop()


def _summaries(run: dict[str, Any]) -> list[Any]:
    """Each worker's summary, the sidecar's location in the MFU's reason left out (the bucket's URL
    on one side, the folder's path on the other: the reason names where its FLOPs came from)."""

    def same_place(summary: dict[str, Any]) -> dict[str, Any]:
        status = summary.get("mfu_status")
        if not status:
            return summary
        reason = re.sub(r"\((?:s3://|/)[^()]*tb_mfu\.json\)", "(the sidecar)", status["reason"])
        return {**summary, "mfu_status": {**status, "reason": reason}}

    return [(w["name"], same_place(w["summary"])) for w in run["workers"]]


def test_the_tab_shows_s3_runs_with_the_cli_figures_and_no_secret(tb, team, page, output_dir):
    body = tb.get_json("/data/plugin/mfu/runs")
    assert body["errors"] == []
    states = {r["name"]: r["state"] for r in body["runs"]}
    assert states == {f"mine/{LOCAL_RUN}": "ready", **{f"theirs/{r}": "ready" for r in REMOTE_RUNS}}
    assert team.bucket.downloads(), "the remote runs were read from the bucket"

    remote = team.cli(team.url)
    local = cli_json(team.local)
    for run in REMOTE_RUNS:
        # the same objects give the same figures from the bucket as from the disk
        assert _summaries(remote[run]) == _summaries(local[run])

    for run in REMOTE_RUNS:
        page.goto(f"{tb.url}/#mfu&run={quote(f'theirs/{run}', safe='')}")
        frame = page.frame_locator(FRAME)
        check_overview_matches_cli(frame, {**remote[run], "name": f"theirs/{run}"})
        text = frame.locator("body").inner_text(timeout=TIMEOUT_MS)
        assert SECRET not in text

    ddp = tb.get_json(f"/data/plugin/mfu/report?run={quote('theirs/ddp_2gpu')}")
    assert [w["summary"] for w in ddp["workers"]] == [w["summary"] for w in remote["ddp_2gpu"]["workers"]]
    for route in ("/data/plugin/mfu/runs", f"/data/plugin/mfu/report?run={quote('theirs/low_sm_efficiency')}"):
        assert SECRET not in json.dumps(tb.get_json(route))
    assert SECRET not in "".join(tb.log)
    page.screenshot(path=str(output_dir / "mfu-s3-run.png"))
    assert not page.errors, page.errors  # type: ignore[attr-defined]
