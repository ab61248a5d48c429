"""Show that a change left every JSON report as it was, field order aside.

The refactor of issue 10 promised no change of behaviour. This script is the
proof: it builds the `--json` report of every sample trace and every
third-party fixture twice, once with the package at a git revision (checked
out into a temporary worktree) and once with the working tree, and compares
the two byte for byte after sorting keys. The `tool_version` field is left out
because it names the code that wrote the report, not what the report says.

    python scripts/report_identity.py            # against HEAD
    python scripts/report_identity.py --rev 9afe34c
    python scripts/report_identity.py /tmp/big.pt.trace.json   # and these traces too (a scaled one)

Exit status 0 means identical; 1 lists the paths whose reports differ.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT.parent / "shared" / "fixtures"


def inputs() -> list[Path]:
    """Every sample run directory, and every third-party fixture file."""
    found = sorted(p for p in (ROOT / "sample_traces").iterdir() if p.is_dir())
    if FIXTURES.is_dir():
        found += sorted(FIXTURES.rglob("*.json.gz")) + sorted(FIXTURES.rglob("*.json"))
    return found


def canonical(package_root: Path, path: Path) -> bytes:
    """The report of one input as sorted-key JSON, or its error text."""
    env = dict(os.environ, PYTHONPATH=str(package_root))
    done = subprocess.run(
        [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(path), "--json"],
        capture_output=True,
        env=env,
        cwd=package_root,
        check=False,
    )
    if not done.stdout.strip():
        return b"exit %d: %s" % (done.returncode, done.stderr.strip()[-300:])
    report = json.loads(done.stdout)
    report.pop("tool_version", None)
    return json.dumps(report, sort_keys=True).encode()


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT.parent)) if path.is_relative_to(ROOT.parent) else str(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="HEAD", help="git revision to compare against")
    parser.add_argument("extra", nargs="*", type=Path, help="more traces or run folders to compare")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(before), args.rev],
            check=True,
            capture_output=True,
        )
        try:
            differ = []
            paths = inputs() + [p.resolve() for p in args.extra]
            for number, path in enumerate(paths, 1):
                same = canonical(before, path) == canonical(ROOT, path)
                print(f"[{number}/{len(paths)}] {'same   ' if same else 'DIFFERS'} {_shown(path)}")
                if not same:
                    differ.append(path)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)], check=False)
    print(f"{len(paths) - len(differ)} of {len(paths)} reports identical to {args.rev}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
