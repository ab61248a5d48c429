"""TensorBoard event files written with TensorBoard's own writer and summary protos.

``EventFileWriter`` does the record framing (TFRecord with masked CRCs); the
summaries are ``scalar_pb`` / ``hparams_pb`` / ``hparams_config_pb`` protos, so the
Scalars, Time Series and HParams dashboards read them as their own. TensorFlow is
never needed: only ``tensorboard`` (and its ``protobuf``) are imported.

``ScalarWriter`` has the ``add_scalar(tag, value, global_step)`` call of
``torch.utils.tensorboard.SummaryWriter``, so ``MfuMonitor`` takes either.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

HParamValue = bool | int | float | str


class ScalarWriter:
    """One TensorBoard run (one directory, one new event file in it)."""

    def __init__(self, logdir: str, filename_suffix: str = "") -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.logdir = logdir
        self._writer = EventFileWriter(logdir, filename_suffix=filename_suffix)

    @property
    def file_name(self) -> str:
        return str(self._writer._file_name)

    def add_summary(self, summary: Any, step: int, wall_time: float | None = None) -> None:
        from tensorboard.compat.proto import event_pb2

        event = event_pb2.Event(wall_time=time.time() if wall_time is None else wall_time, step=int(step))
        event.summary.CopyFrom(summary)
        self._writer.add_event(event)

    def add_scalar(
        self, tag: str, value: float, global_step: int, wall_time: float | None = None, description: str | None = None
    ) -> None:
        """A scalar point; NaN and infinities are skipped (TensorBoard draws them as gaps anyway)."""
        from tensorboard.plugins.scalar.summary_v2 import scalar_pb

        value = float(value)
        if not math.isfinite(value):
            return
        self.add_summary(scalar_pb(tag, value, description=description), global_step, wall_time)

    def add_hparams(self, hparams: Mapping[str, HParamValue], trial_id: str | None = None) -> None:
        """The run's session-start info for the HParams dashboard (its hyperparameter values)."""
        from tensorboard.plugins.hparams.summary_v2 import hparams_pb

        self.add_summary(hparams_pb(dict(hparams), trial_id=trial_id), 0)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> ScalarWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_hparams_config(
    logdir: str, filename_suffix: str, hparams: Sequence[tuple[str, str]], metrics: Sequence[tuple[str, str]]
) -> str:
    """The experiment's top-level config (hyperparameter and metric names with their
    descriptions), so the HParams dashboard lists the metric columns and can sort by them."""
    from tensorboard.plugins.hparams.summary_v2 import HParam, Metric, hparams_config_pb

    pb = hparams_config_pb(
        hparams=[HParam(name, description=desc) for name, desc in hparams],
        metrics=[Metric(tag, display_name=tag.rsplit("/", 1)[-1], description=desc) for tag, desc in metrics],
    )
    with ScalarWriter(logdir, filename_suffix) as w:
        w.add_summary(pb, 0)
        return w.file_name
