"""TensorBoard entry point of the MFU tab.

TensorBoard imports this module for every ``tensorboard`` command, and an
exception raised here would stop the whole server. So it imports nothing but
TensorBoard's own ``base_plugin``; the flags' table (``running.flags``, light) is
imported to define the flags, and the plugin, the analysis core and numpy inside
``load()``, where TensorBoard catches and logs a failure and carries on without the tab.

The options the analysis shares with ``tb-mfu`` (the peak, the device, TF32, the caps, the
workers, the storage options, ...) come from ``running.flags.OPTIONS``, the one table both
faces generate their flags from; the flags defined here are the tab's own (its sources,
what its users see and may send).
"""

from __future__ import annotations

from tensorboard.plugins import base_plugin


class MfuPluginLoader(base_plugin.TBLoader):
    """Adds the ``--mfu_*`` flags and builds the plugin."""

    def define_flags(self, parser):  # type: ignore[no-untyped-def]
        group = parser.add_argument_group("mfu plugin")
        for add in (_source_flags, _table_flags, _access_flags):
            add(group)

    def fix_flags(self, flags):  # type: ignore[no-untyped-def]
        from .logdir_spec import move_unreadable_sources
        from .settings import settings_from_flags

        try:
            values = settings_from_flags(flags).values
            if values["thresholds"]:  # their names are the diagnosis's (imported only when given)
                from ..diagnosis import from_options as thresholds_from
                from ..running.flags import analysis_options

                try:
                    thresholds_from(analysis_options(values))
                except ValueError as exc:
                    raise ValueError(f"--mfu_threshold: {exc}") from None
        except ValueError as exc:
            raise base_plugin.FlagsError(str(exc)) from None
        idle = getattr(flags, "mfu_upload_idle_seconds", None)
        if idle is not None and not idle > 0:
            raise base_plugin.FlagsError("--mfu_upload_idle_seconds must be a positive number of seconds")
        # TensorBoard's own loader must never see a source it cannot read: it would stop loading.
        move_unreadable_sources(flags)
        options_file = values["storage_options"]
        if options_file:
            from ..trace.remote.storage import use_storage_options

            try:
                use_storage_options(options_file)
            except Exception as exc:  # a TraceError naming the file; never its content
                raise base_plugin.FlagsError(f"--mfu_storage_options: {exc}") from None
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
        from .shutdown import install

        install()  # SIGTERM and Ctrl-C end the server within a second, loading or not (shutdown.py)
        return MfuPlugin(context)


def _table_flags(group):  # type: ignore[no-untyped-def]
    """The options of ``running.flags.OPTIONS`` the tab has, as ``--mfu_<name>`` flags. Values stay
    text here: ``settings_from_flags`` parses them, so a bad one is a flag error naming it."""
    from ..running.flags import PLUGIN, help_text, of_face

    for option in of_face(PLUGIN):
        if option.kind == "switch":
            group.add_argument(option.plugin_flag, action="store_true", help=help_text(option))
            continue
        group.add_argument(
            option.plugin_flag,
            metavar=option.metavar,
            type=str,
            action="append" if option.kind == "list" else "store",
            default=None,
            help=help_text(option),
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
