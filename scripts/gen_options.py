"""Write docs/options.md from the one options table, ``tb_mfu_plugin/running/flags.py``.

    python scripts/gen_options.py           # rewrite docs/options.md
    python scripts/gen_options.py --check   # exit 1 if it is stale

``tests/test_options.py`` fails while the page is stale, so the docs name every flag as both faces
define it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tb_mfu_plugin.running import flags as F  # noqa: E402

PAGE = ROOT / "docs" / "options.md"
SECTIONS = (
    (F.ANALYSIS, "The analysis", "What the figures are computed with: they change the report."),
    (
        F.LIMITS,
        "Caps on one file",
        "What one trace file may cost ([limits.md](limits.md)); a file over a cap "
        "is that file's one-line error, naming the flag that raises it.",
    ),
    (
        F.RUNNING,
        "Running the files",
        "How many files are analysed at once and where ([scaling.md](scaling.md)); "
        "the report is the same whichever way they ran.",
    ),
    (
        F.STORAGE,
        "Remote locations",
        "Where the credentials of buckets and HTTP logdirs come from ([security.md](security.md)).",
    ),
    (F.CACHE, "The tab's disk cache", "The TensorBoard tab's only: the CLI keeps nothing between runs."),
)
HEAD = """# Options

<!-- Written by scripts/gen_options.py from tb_mfu_plugin/running/flags.py: edit the table there. -->

Every option is defined once, in `OPTIONS` of `tb_mfu_plugin/running/flags.py`, and both faces
generate their flags from it: `tb-mfu analyze|compare|export-scalars --name-with-dashes` and
`tensorboard --mfu_name_with_underscores`. A value comes from the flag, else from its environment
variable, else the default; a bad one is refused before anything runs, naming the flag or the
variable. The flags each face has of its own (`--json`, `--html`, `--top`, `--evidence`, `--min-mfu` of the CLI;
the tab's sources, uploads and access: `tensorboard --helpfull`) are not options of the analysis
and are not here.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _flag(option: F.Option, face: str) -> str:
    flag = option.flag(face)
    if flag is None:
        return "—"
    metavar = "" if option.kind == "switch" else f" {option.metavar or 'VALUE'}"
    aliases = "".join(f", `{a}`" for a in option.aliases) if face == F.CLI else ""
    return f"`{flag}{metavar}`{aliases}"


def page() -> str:
    out = [HEAD]
    for sets, title, words in SECTIONS:
        out += [
            f"\n## {title}\n",
            f"{words}\n",
            "| CLI | TensorBoard | Variable | Type | Default | What it does |",
            "|---|---|---|---|---|---|",
        ]
        for o in F.OPTIONS:
            if o.sets != sets:
                continue
            env = f"`${o.env}`" if o.env else "—"
            out.append(
                f"| {_flag(o, F.CLI)} | {_flag(o, F.PLUGIN)} | {env} | {_cell(o.type)} | {_cell(o.default_said())} "
                f"| {_cell(o.help)} |"
            )
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/options.md is stale")
    args = parser.parse_args()
    text = page()
    if args.check:
        stale = not PAGE.exists() or PAGE.read_text(encoding="utf-8") != text
        print("stale docs/options.md: run python scripts/gen_options.py" if stale else "docs/options.md is current")
        return 1 if stale else 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
