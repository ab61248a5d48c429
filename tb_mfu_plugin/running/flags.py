"""Every option of an analysis, defined once: the table both faces generate their flags from.

One row per option: its name, type, default, help, the CLI's flag, the TensorBoard plugin's
flag and its environment variable. ``tb-mfu`` (``cli/main.py``) and the tab
(``tensorboard/entry.py``) add their flags from ``OPTIONS`` and read them back with
``resolve``, so an option the CLI has the plugin has too (``tests/test_options.py`` checks
it), and a team server can set TF32 or a device name as a user's terminal does. A value is
taken from the flag, else from the variable, else the default; a bad one is a ``ValueError``
naming the flag or the variable it came from. ``docs/options.md`` is this table, written by
``scripts/gen_options.py``.

Light to import (the standard library, ``trace.limits``, and the modules that read the storage
options and the memory cap, for their variables' names): TensorBoard's entry point imports it
to define its flags for every ``tensorboard`` command, so it must cost little and never fail.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..trace.limits import CAP_WORDS, DEFAULT_LIMITS, FLAGS, format_limit, parse_size
from ..trace.remote.storage import STORAGE_OPTIONS_ENV
from .memory_cap import MEMORY_ENV

# What an option sets: a field of AnalysisOptions, a cap of trace.limits.Limits, how files are run
# (processes, Dask, each process's memory), where remote credentials come from, the tab's disk cache.
ANALYSIS, LIMITS, RUNNING, STORAGE, CACHE = "analysis", "limits", "running", "storage", "cache"
CLI, PLUGIN = "cli", "plugin"

WORKERS_ENV = "TB_MFU_WORKERS"
SCHEDULER_ENV = "TB_MFU_SCHEDULER"
CACHE_DIR_ENV = "TB_MFU_CACHE_DIR"
CACHE_MAX_BYTES_ENV = "TB_MFU_CACHE_MAX_BYTES"
# Processes that analyse files at once, on both faces: each holds one decoded trace, about its
# size in memory, so a many-core machine still runs at most this many unless told otherwise.
MAX_DEFAULT_WORKERS = 8


@dataclass(frozen=True)
class Option:
    """One option. ``parse`` turns the text of a flag or variable into the value (ValueError if
    bad); ``kind`` is ``value``, ``switch`` (a flag without a value) or ``list`` (repeatable)."""

    name: str  # the flags' stem: --device-name, --mfu_device_name
    sets: str  # ANALYSIS, LIMITS, RUNNING, STORAGE or CACHE
    type: str  # as the docs say it
    default: Any
    help: str
    parse: Callable[[str], Any] = str
    metavar: str | None = None
    kind: str = "value"
    env: str | None = None
    faces: tuple[str, ...] = (CLI, PLUGIN)
    field: str = ""  # the AnalysisOptions or Limits field it sets, when not ``name``
    aliases: tuple[str, ...] = ()  # older CLI spellings that still work
    default_text: str = ""  # the default as the help says it, when not ``default`` itself

    @property
    def dest(self) -> str:
        return self.field or self.name

    @property
    def cli_flag(self) -> str | None:
        return "--" + self.name.replace("_", "-") if CLI in self.faces else None

    @property
    def plugin_flag(self) -> str | None:
        return "--mfu_" + self.name if PLUGIN in self.faces else None

    def flag(self, face: str) -> str | None:
        return self.cli_flag if face == CLI else self.plugin_flag

    def default_said(self) -> str:
        return self.default_text or ("none" if self.default in (None, (), False) else str(self.default))


class Refused(ValueError):
    """A value refused in words of its own (an unknown GPU and the nearest known ones), which the
    faces print after the flag's or variable's name instead of "expects ..."."""


def device_name(text: str) -> str:
    """A GPU model of the peak table (``analysis.device.peaks``), as a trace's device names it
    ("NVIDIA H100 80GB HBM3", "h100"); an unknown one is refused with the nearest known names,
    never taken to mean "peak unknown"."""
    from ..analysis.device.peaks import PEAKS, match_gpu  # here: the entry point must not load the analysis

    if match_gpu(text) is not None:
        return text
    names = {name.lower(): name for name in PEAKS}
    near = difflib.get_close_matches(text.lower(), list(names), n=3, cutoff=0.4)
    if near:
        raise Refused(f"unknown GPU {text!r}; the nearest known: {', '.join(names[n] for n in near)}")
    raise Refused(f"unknown GPU {text!r}; known: {', '.join(PEAKS)}")


def positive_number(text: str) -> float:
    value = float(text)
    if not value > 0:  # also refuses NaN
        raise ValueError(text)
    return value


def positive_int(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise ValueError(text)
    return int(text)


def threshold(text: str) -> tuple[str, float]:
    """``NAME=VALUE`` as (name, value); which names exist is the diagnosis's to say."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise ValueError(text)
    return name.strip(), float(value)


def regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error:
        raise ValueError(text) from None
    return text


def size(text: str) -> int:
    return parse_size(text)


def memory_size(text: str) -> str:
    """A memory cap as ``memory_cap`` reads it: a positive size, or ``none``/``off``/``0``."""
    if text.lower() not in ("none", "off", "0") and parse_size(text) <= 0:
        raise ValueError(text)
    return text


def _limit_parse(unit: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = float(parse_size(text)) if unit == "bytes" else float(text)
        if not value >= 0:
            raise ValueError(text)
        return value

    return parse


def _limit_rows() -> list[Option]:
    """The caps of docs/limits.md, from ``trace.limits.FLAGS`` (which their errors name)."""
    rows = []
    for flag, (field, unit) in FLAGS.items():
        default = getattr(DEFAULT_LIMITS, field)
        rows.append(
            Option(
                flag.removeprefix("--").replace("-", "_"),
                LIMITS,
                "size (K, M, G suffixes)" if unit == "bytes" else f"number ({unit})",
                default,
                f"{CAP_WORDS[field]}.",
                _limit_parse(unit),
                unit.upper(),
                default_text=format_limit(default, unit),
            )
        )
    return rows


_WHERE_TO_GET = "one of the GPU models of docs/mfu.md"
OPTIONS: tuple[Option, ...] = (
    Option(
        "peak_tflops",
        ANALYSIS,
        "number",
        None,
        "Peak dense TFLOP/s to use for MFU, instead of the peak of the trace's device (beats --device-name).",
        positive_number,
        "TFLOPS",
        default_text="the device's peak",
    ),
    Option(
        "device_name",
        ANALYSIS,
        "text",
        None,
        f"GPU model to take the peak from, e.g. 'H100 SXM' ({_WHERE_TO_GET}), instead of the trace's device; "
        "an unknown name is refused with the nearest known ones.",
        device_name,
        "NAME",
        default_text="the trace's device",
    ),
    Option(
        "flops_per_step",
        ANALYSIS,
        "number",
        None,
        "Model FLOPs per step, instead of the sidecar file's or the count from the trace's shapes.",
        positive_number,
        "FLOPS",
        default_text="the sidecar's, else counted",
    ),
    Option(
        "tf32",
        ANALYSIS,
        "switch",
        False,
        "fp32 matmuls ran as TF32 on tensor cores (torch.backends.cuda.matmul.allow_tf32): their second MFU is against "
        "the TF32 peak (MFU itself is against the 16-bit tensor-core peak, PaLM's convention).",
        kind="switch",
        default_text="off",
    ),
    Option(
        "all_steps",
        ANALYSIS,
        "switch",
        False,
        "Analyse every recorded step, warm-up included: by default leading steps still warming up are left "
        "out of every per-step figure (each named in the report), and this puts them back, as torch-tb-profiler "
        "counts them.",
        kind="switch",
        default_text="off (the steady state)",
    ),
    Option(
        "interconnect",
        ANALYSIS,
        "text",
        None,
        "The link collectives run over, for bus-bandwidth shares: 'NVLink 4', 'PCIe 5 x16', ... or a GB/s "
        "figure (docs/distributed.md).",
        metavar="LINK",
        default_text="inferred from the GPU model",
    ),
    Option(
        "tensor_core_pattern",
        ANALYSIS,
        "regex, repeatable",
        (),
        "Also count kernels whose name matches REGEX as tensor-core kernels.",
        regex,
        "REGEX",
        kind="list",
        field="tensor_core_patterns",
    ),
    Option(
        "threshold",
        ANALYSIS,
        "NAME=VALUE, repeatable",
        (),
        "Change a diagnosis threshold, e.g. memcpy_bound_share=0.1 (names in docs/diagnosis.md).",
        threshold,
        "NAME=VALUE",
        kind="list",
        field="thresholds",
    ),
    *_limit_rows(),
    Option(
        "workers",
        RUNNING,
        "count",
        None,
        "Trace files analysed at once, in N local processes (the CLI runs N=1 in its own process, one file "
        "after another); each holds one decoded trace, about its size in memory. With --scheduler local, "
        "the LocalCluster's workers.",
        positive_int,
        "N",
        env=WORKERS_ENV,
        aliases=("--jobs", "-j"),
        default_text=f"the usable cores, at most {MAX_DEFAULT_WORKERS}",
    ),
    Option(
        "scheduler",
        RUNNING,
        "text",
        None,
        "Analyse on a Dask cluster instead: tcp://host:8786, or 'local' for a LocalCluster; its workers read "
        "the trace files by path, so they must see them (pip install 'tb_mfu_plugin[dask]').",
        metavar="ADDRESS",
        env=SCHEDULER_ENV,
    ),
    Option(
        "worker_max_memory",
        RUNNING,
        "size or 'none'",
        None,
        "Memory cap of each analysis process (K, M, G suffixes, or 'none'). A file that needs more gets the "
        "error 'analysis ran out of its memory cap'; the others go on.",
        memory_size,
        "BYTES",
        env=MEMORY_ENV,
        default_text="the larger of 2G and 3/4 of the memory divided by the workers",
    ),
    Option(
        "storage_options",
        STORAGE,
        "file",
        None,
        "JSON or TOML file of fsspec storage options keyed by URL prefix, for remote locations (s3://, gs://, "
        "az://, http://). Its values are never shown, logged or cached; credentials otherwise come from the "
        "environment, profiles and instance roles.",
        metavar="FILE",
        env=STORAGE_OPTIONS_ENV,
    ),
    Option(
        "cache_dir",
        CACHE,
        "folder",
        None,
        "Where the MFU tab keeps analysed traces between restarts ('none' turns it off). Nothing is ever "
        "written into the logdir.",
        metavar="DIR",
        env=CACHE_DIR_ENV,
        faces=(PLUGIN,),
        default_text="~/.cache/tb_mfu_plugin",
    ),
    Option(
        "cache_max_bytes",
        CACHE,
        "size",
        2 << 30,
        "Cap of the MFU tab's disk cache (K, M, G suffixes); the least recently used analyses go first.",
        size,
        "BYTES",
        env=CACHE_MAX_BYTES_ENV,
        faces=(PLUGIN,),
        default_text="2 GiB",
    ),
)
BY_NAME = {o.name: o for o in OPTIONS}


def of_face(face: str, sets: Iterable[str] | None = None) -> list[Option]:
    """The options ``face`` has (those that set ``sets``, if given), in the table's order."""
    wanted = set(sets) if sets is not None else None
    return [o for o in OPTIONS if face in o.faces and (wanted is None or o.sets in wanted)]


def help_text(option: Option) -> str:
    """The help both faces show: the option's words, its default and its variable."""
    env = f"; ${option.env}" if option.env else ""
    return f"{option.help.removesuffix('.')} (default: {option.default_said()}{env})."


def resolve(given: Mapping[str, Any] | object, face: str, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Every option of ``face`` by its ``dest``: the flag's value in ``given`` (a namespace or a
    mapping by dest; None or absent: not given), else the variable's, else the default.
    Text is parsed here (the plugin's flags arrive as typed), values already parsed are kept;
    ValueError names the flag or variable of a bad value."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for o in of_face(face):
        raw = given.get(o.dest) if isinstance(given, Mapping) else getattr(given, _attr(o, face), None)
        source = o.flag(face) or o.name
        if _absent(raw) and o.env and environ.get(o.env, "").strip():
            raw, source = environ[o.env].strip(), f"${o.env}"
        values[o.dest] = o.default if _absent(raw) else _parsed(o, raw, source)
    return values


def _attr(option: Option, face: str) -> str:
    """The attribute argparse keeps a flag's value under on ``face``."""
    return option.dest if face == CLI else "mfu_" + option.name


def _absent(raw: Any) -> bool:
    return raw is None or raw is False or (isinstance(raw, str) and not raw.strip()) or raw == [] or raw == ()


def _parsed(option: Option, raw: Any, source: str) -> Any:
    if option.kind == "switch":
        return bool(raw)
    items = ([raw] if isinstance(raw, str) else list(raw)) if option.kind == "list" else [raw]
    out = []
    for item in items:
        if not isinstance(item, str):  # parsed already (the CLI's argparse, or configure(...) in Python)
            out.append(item)
            continue
        try:
            out.append(option.parse(item.strip()))
        except Refused as exc:
            raise ValueError(f"{source}: {exc}") from None
        except ValueError:
            raise ValueError(f"{source} expects {expects(option)}, got {item!r}") from None
    return tuple(out) if option.kind == "list" else out[0]


def expects(option: Option) -> str:
    if option.sets == LIMITS:
        return "a non-negative number" + (" (K, M, G suffixes)" if option.type.startswith("size") else "")
    words = {"number": "a positive number", "count": "a positive integer", "size": "a size (e.g. 512MiB)"}
    return words.get(option.type, option.type.removesuffix(", repeatable"))


def analysis_options(values: Mapping[str, Any]) -> Any:
    """The ``AnalysisOptions`` of resolved ``values`` (``resolve``): its fields and its caps."""
    from ..analysis.options import AnalysisOptions  # here: the entry point must not load the analysis
    from ..trace.limits import Limits

    fields = {o.dest: values[o.dest] for o in OPTIONS if o.sets == ANALYSIS and o.dest in values}
    caps = {o.dest: type(o.default)(values[o.dest]) for o in OPTIONS if o.sets == LIMITS and o.dest in values}
    return AnalysisOptions(**fields, limits=Limits(**caps))


def default_workers() -> int:
    """Processes that analyse files at once when no flag or variable says, on every face: the
    usable cores, at most ``MAX_DEFAULT_WORKERS``."""
    from .jobs import usable_cores  # here: jobs loads the report types, which the entry point must not

    return min(usable_cores(), MAX_DEFAULT_WORKERS)
