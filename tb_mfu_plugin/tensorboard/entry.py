"""TensorBoard entry point of the MFU tab.

TensorBoard imports this module for every ``tensorboard`` command, and an
exception raised here would stop the whole server. So it imports nothing but
TensorBoard's own ``base_plugin`` and the leaf module ``env``; the plugin, the
analysis core, numpy and msgspec are imported inside ``load()``, where
TensorBoard catches and logs a failure and carries on without the tab.
"""

from __future__ import annotations

from tensorboard.plugins import base_plugin

from .env import CACHE_DIR_ENV, CACHE_MAX_BYTES_ENV, SCHEDULER_ENV, WORKERS_ENV


class MfuPluginLoader(base_plugin.TBLoader):
    """Adds the ``--mfu_*`` flags and builds the plugin."""

    def define_flags(self, parser):  # type: ignore[no-untyped-def]
        group = parser.add_argument_group("mfu plugin")
        for add in (_source_flags, _cache_and_worker_flags, _analysis_flags, _access_flags, _limit_flags):
            add(group)

    def fix_flags(self, flags):  # type: ignore[no-untyped-def]
        from ..trace.limits import limits_from_flags
        from .logdir_spec import move_unreadable_sources
        from .settings import settings_from_flags

        try:
            limits_from_flags(flags)
            settings_from_flags(flags)
        except ValueError as exc:
            raise base_plugin.FlagsError(str(exc)) from None
        idle = getattr(flags, "mfu_upload_idle_seconds", None)
        if idle is not None and not idle > 0:
            raise base_plugin.FlagsError("--mfu_upload_idle_seconds must be a positive number of seconds")
        # TensorBoard's own loader must never see a source it cannot read: it would stop loading.
        move_unreadable_sources(flags)
        options_file = getattr(flags, "mfu_storage_options", None)
        if options_file:
            from ..trace.remote.storage import use_storage_options

            try:
                use_storage_options(options_file)
            except Exception as exc:  # a TraceError naming the file; never its content
                raise base_plugin.FlagsError(f"--mfu_storage_options: {exc}") from None
        peak = getattr(flags, "mfu_peak_tflops", None)
        if peak is not None and not peak > 0:
            raise base_plugin.FlagsError("--mfu_peak_tflops must be a positive number")
        cap = getattr(flags, "mfu_upload_max_bytes", None)
        if cap is not None:
            from ..trace.limits import parse_size

            try:
                if parse_size(cap) <= 0:
                    raise ValueError(cap)
            except ValueError:
                raise base_plugin.FlagsError(f"--mfu_upload_max_bytes: {cap!r} is not a size (e.g. 512MiB)") from None

    def load(self, context):  # type: ignore[no-untyped-def]
        from .plugin import MfuPlugin

        return MfuPlugin(context)


def _cache_and_worker_flags(group):  # type: ignore[no-untyped-def]
    """Where analyses are kept and what runs them."""
    group.add_argument(
        "--mfu_cache_dir",
        metavar="DIR",
        type=str,
        default=None,
        help=(
            "Where the MFU tab keeps analysed traces between restarts "
            f"(default: ${CACHE_DIR_ENV}, else ~/.cache/tb_mfu_plugin; 'none' turns it off). "
            "Nothing is ever written into the logdir."
        ),
    )
    group.add_argument(
        "--mfu_cache_max_bytes",
        metavar="BYTES",
        type=str,
        default=None,
        help=(
            f"Cap of the MFU tab's disk cache (K, M, G suffixes; default: ${CACHE_MAX_BYTES_ENV}, else 2G); "
            "the least recently used analyses go first."
        ),
    )
    group.add_argument(
        "--mfu_workers",
        metavar="N",
        type=str,
        default=None,
        help=(
            f"Processes that analyse trace files at once (default: ${WORKERS_ENV}, else the usable cores, "
            "at most 8). Each holds one decoded trace, about its size in memory."
        ),
    )
    from ..running.memory_cap import MEMORY_ENV  # a leaf module: the standard library and trace.limits

    group.add_argument(
        "--mfu_worker_max_memory",
        metavar="BYTES",
        type=str,
        default=None,
        help=(
            f"Memory cap of each analysis process (K, M, G suffixes, or 'none'; default: ${MEMORY_ENV}, else "
            "the larger of 2G and 3/4 of the memory divided by --mfu_workers). A file that needs more gets "
            "the error 'analysis ran out of its memory cap'; the server goes on."
        ),
    )
    group.add_argument(
        "--mfu_scheduler",
        metavar="ADDRESS",
        type=str,
        default=None,
        help=(
            f"Analyse on a Dask cluster instead (default: ${SCHEDULER_ENV}): tcp://host:8786, or 'local' "
            "for a LocalCluster. Its workers read the trace files by path: they must see them. "
            "Needs pip install 'tb_mfu_plugin[dask]'."
        ),
    )


def _source_flags(group):  # type: ignore[no-untyped-def]
    """Sources only the tab reads (logdir_spec.py says why)."""
    group.add_argument(
        "--mfu_logdir_spec",
        metavar="NAME:LOCATION,...",
        type=str,
        default=None,
        help=(
            "More sources for the MFU tab only, as --logdir_spec names them: buckets (s3://, gs://, az://), "
            "HTTP folders and archives (.zip, .tar.gz), which TensorBoard's own loading cannot read. Such "
            "entries of --logdir / --logdir_spec are moved here at start-up, with a note."
        ),
    )
    group.add_argument(
        "--mfu_tensorboard_reads_urls",
        action="store_true",
        help=(
            "Leave s3://, gs://, az://, hdfs:// entries of --logdir_spec to TensorBoard's own loading as well, "
            "for its dashboards to read event files there. An error there (no credentials, the network) then "
            "stops TensorBoard's loading of every logdir."
        ),
    )


def _analysis_flags(group):  # type: ignore[no-untyped-def]
    group.add_argument(
        "--mfu_peak_tflops",
        metavar="TFLOPS",
        type=float,
        default=None,
        help="Peak TFLOP/s used for MFU, instead of the peak looked up from the trace's device.",
    )


def _access_flags(group):  # type: ignore[no-untyped-def]
    """What users of the server see and may send: paths, uploads, remote credentials."""
    group.add_argument(
        "--mfu_show_full_paths",
        action="store_true",
        help=(
            "Show absolute server paths in the MFU tab. By default paths are shown relative to "
            "the logdir (or the --logdir_spec name), as every user of the server sees them."
        ),
    )
    group.add_argument(
        "--mfu_confine_to_logdir",
        action="store_true",
        help=(
            "Refuse trace and sidecar files whose real path (symbolic links resolved) is outside "
            "the logdirs; for servers whose logdirs others can write into. By default links are followed."
        ),
    )
    group.add_argument(
        "--mfu_disable_upload",
        action="store_true",
        help=(
            "Turn off uploading traces in the MFU tab (the tab then hides its drop zone). "
            "Uploads are kept in the cache directory, never in a logdir (docs/security.md)."
        ),
    )
    group.add_argument(
        "--mfu_upload_max_bytes",
        metavar="BYTES",
        type=str,
        default=None,
        help="The most bytes one upload in the MFU tab may hold, all its files together (default 1GiB).",
    )
    group.add_argument(
        "--mfu_upload_idle_seconds",
        metavar="SECONDS",
        type=float,
        default=None,
        help=(
            "An upload in the MFU tab that receives no byte for this long is dropped, committed or not "
            "(default 60); a client may have 4 uploads arriving at once, the server 16."
        ),
    )
    group.add_argument(
        "--mfu_allowed_hosts",
        metavar="NAMES",
        type=str,
        default=None,
        help=(
            "Comma-separated host names this server is reached by, besides IP addresses, localhost, the "
            "machine's name and --host (e.g. the name of a proxy in front: tb.example.com, or .example.com "
            "for every name under it; '*' for any). Uploads naming another Host are refused (DNS rebinding)."
        ),
    )

    # storage.py imports only the standard library and our leaf modules (fsspec when used)
    from ..trace.remote.storage import STORAGE_OPTIONS_ENV

    group.add_argument(
        "--mfu_storage_options",
        metavar="FILE",
        type=str,
        default=None,
        help=(
            "JSON or TOML file of fsspec storage options keyed by URL prefix, for remote logdirs "
            f"(s3://, gs://, az://, http://; default: ${STORAGE_OPTIONS_ENV}). Its values are never "
            "shown, logged or cached. Credentials otherwise come from the environment, profiles and roles."
        ),
    )


def _limit_flags(group):  # type: ignore[no-untyped-def]
    # The caps of docs/limits.md, one flag each (the CLI's --max-* under an mfu_ prefix).
    # limits.py is a leaf module (dataclasses and re only), so importing it here is safe.
    from ..trace.limits import DEFAULT_LIMITS, FLAGS, format_limit, plugin_flag

    for flag, (field, unit) in FLAGS.items():
        group.add_argument(
            f"--{plugin_flag(flag)}",
            metavar=unit.upper(),
            type=str,
            default=None,
            help=f"Cap of the MFU tab on one trace file (docs/limits.md); default "
            f"{format_limit(getattr(DEFAULT_LIMITS, field), unit)}.",
        )
