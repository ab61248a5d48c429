"""validation/packed.py: a host's traces kept as one traces.tar.xz come back as the same traces, under
their names, beside the ground truth the tree keeps; and every packed host in the tree unpacks to the
traces its ground truth names."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import ROOT, load_module

packed = load_module(ROOT / "validation" / "packed.py")


def _trace(path: Path, name: str) -> dict:
    doc = {"traceEvents": [{"ph": "X", "name": name, "ts": 1, "dur": 2}]}
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    return doc


def test_pack_then_unpack_gives_the_same_traces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packed, "CACHE", str(tmp_path / "cache"))
    host = tmp_path / "host"
    names = ("gain_pairs/a/before/rank0.1.pt.trace.json.gz", "mfu_truth/r/rank0.2.pt.trace.json.gz")
    docs = {rel: _trace(host / rel, rel[:4]) for rel in names}
    (host / "mfu_truth" / "ground_truth.json").write_text('{"runs": {}}')
    assert packed.unpacked(str(host / "mfu_truth")) == str(host / "mfu_truth")  # traces in the tree: itself

    packed.pack(str(host), ["mfu_truth", "gain_pairs"])
    assert (host / "traces.tar.xz").is_file()
    assert not list(host.rglob("*.pt.trace.json*"))  # the packed traces left the tree
    assert (host / "mfu_truth" / "ground_truth.json").is_file()  # the ground truth stays
    with pytest.raises(SystemExit):  # never over an archive that exists
        packed.pack(str(host), ["mfu_truth"])

    out = Path(packed.unpacked(str(host / "mfu_truth")))
    assert out != host / "mfu_truth" and out.name == "mfu_truth"
    root = out.parent
    for rel, doc in docs.items():
        assert json.loads(gzip.open(root / rel).read()) == doc
    assert (root / "mfu_truth" / "ground_truth.json").read_text() == '{"runs": {}}'
    assert packed.unpack(str(host)) == str(root)  # unpacked once per archive


# the H200 set's archive is validation/traces.tar.xz itself (host "."), the held-out hosts' one folder down
HOSTS = sorted(str(p.parent.relative_to(ROOT / "validation")) for p in (ROOT / "validation").glob("**/traces.tar.xz"))


@pytest.mark.parametrize("host", HOSTS)
def test_every_packed_host_unpacks_the_traces_its_truth_names(host: str) -> None:
    root = Path(packed.unpack(str(ROOT / "validation" / host)))
    # a set's ground truth, or a Lightning run's (its one trace under the run's name)
    truths = [*(ROOT / "validation" / host).glob("*/ground_truth.json")]
    truths += (ROOT / "validation" / host).glob("*/lightning_ground_truth.json")
    sets = [t for t in truths if (root / t.parent.name).is_dir()]
    assert sets, f"{host}/traces.tar.xz holds no folder with a ground truth"
    for truth in sets:  # (a folder whose traces are in git history only is not in the archive)
        gt = json.loads(truth.read_text())
        folders = [truth.parent.name + "/" + r for r in gt.get("runs", {})]
        folders += [f"{truth.parent.name}/{p}/{s}" for p in gt.get("pairs", {}) for s in ("before", "after")]
        if truth.name.startswith("lightning"):  # its runs are the one run with and without the profiler
            folders = [f"{truth.parent.name}/{gt['name']}"]
        for folder in folders:
            assert list((root / folder).glob("*.pt.trace.json.gz")), f"{host}/{folder}: no trace"
