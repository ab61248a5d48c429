"""SM efficiency of one kernel as the hardware counts it, estimated from the trace's fields.

Nsight Compute's ``sm__cycles_active.avg.pct_of_peak_sustained_elapsed`` (the nvprof-era SM
efficiency) is the share of the kernel's elapsed cycles in which an average SM had a warp resident.
torch-tb-profiler's trace estimate, ``min(1, blocks / SMs)``, reads every kernel of one wave or more
as 1.0. Measured on an H200 (validation/sm_zoo, docs/metrics.md), that holds for long single-wave
kernels only. Two things it leaves out:

- **Launch overhead.** The hardware's elapsed time runs from the launch to the last block's end:
  about 2 µs more than the trace's duration, which starts when the first block does. In a 1 ms
  kernel that is noise. In a 2 µs cuBLAS ``splitKreduce`` it is half the elapsed time: the hardware
  reads 0.41, torch-tb-profiler's estimate 0.97.
- **Waves.** With ``B`` blocks on ``S`` SMs that hold ``m`` blocks each, SM *i* gets ``B // S`` or
  ``B // S + 1`` blocks and needs ``ceil(n_i / m)`` rounds. The kernel lasts as long as the
  busiest SM, so a partial last wave leaves the other SMs idle at the end.

So the estimate is ``waves(B / S, m) × dur / (dur + overhead)``. ``waves`` blends the round count
above with its fluid limit (each SM busy in proportion to its blocks). The two constants are fitted
on the zoo, and validation/fit_sm_efficiency.py refits them from the recorded CSV. ``m`` comes from
Kineto's occupancy estimate, ``min(m, B / S) × threads per block / max threads per SM``. Where that
says nothing (nvjet GEMMs and cuDNN attention report 0), the kernel is taken to hold all its blocks
at once.
"""

from __future__ import annotations

import numpy as np

# Fitted on the zoo (validation/sm_zoo/zoo_matched.csv.gz, an H200; docs/metrics.md has the error table).
OVERHEAD_US = 2.4  # the hardware's elapsed time past the trace's duration: launch and drain
ROUND_WEIGHT = 0.5  # blend of the round count (1) and its fluid limit (0) for partial waves
MAX_THREADS_PER_SM = 2048  # Hopper, Ampere (A100), Volta; deviceProperties' maxThreadsPerMultiprocessor


def resident_blocks(
    bps: np.ndarray, occ_pct: np.ndarray, block_threads: np.ndarray, max_threads: float = MAX_THREADS_PER_SM
) -> np.ndarray:
    """Blocks one SM holds at once, from Kineto's occupancy estimate; inf where it does not say.

    The estimate is ``min(m, blocks/SM) × threads / max threads`` (Kineto's ``kernelOccupancy``),
    so it tells ``m`` only where it is below what ``blocks/SM`` alone would give."""
    with np.errstate(divide="ignore", invalid="ignore"):
        per_sm = occ_pct / 100.0 * max_threads / block_threads
        # Kineto rounds the percentage: half a point of it is this many blocks per SM
        slack = 0.5 / 100.0 * max_threads / block_threads
    known = np.isfinite(per_sm) & (per_sm > 0) & (block_threads > 0) & (per_sm + slack < bps)
    return np.where(known, np.maximum(1.0, np.round(per_sm)), np.inf)


def wave_coverage(bps: np.ndarray, resident: np.ndarray, round_weight: float) -> np.ndarray:
    """Mean SM busy time over the busiest SM's, for blocks spread as evenly as the block scheduler
    spreads them: with ``bps = q + f`` blocks per SM, a share ``f`` of the SMs runs ``q + 1`` blocks
    and the rest ``q``, each SM ``resident`` at once. Per SM, so the SM count drops out."""
    b = np.maximum(np.nan_to_num(bps, nan=0.0), 0.0)
    q = np.floor(b + 1e-9)
    f = np.clip(b - q, 0.0, 1.0)
    hi = q + (f > 1e-9)  # the busiest SM's blocks
    m = np.where(np.isfinite(resident), resident, np.maximum(hi, 1.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        by_rounds = (f * np.ceil((q + 1) / m) + (1 - f) * np.ceil(q / m)) / np.ceil(hi / m)
        fluid = b / hi
    out = round_weight * by_rounds + (1 - round_weight) * fluid
    return np.where(hi > 0, np.clip(out, 0.0, 1.0), 0.0)


def sm_active(
    bps: np.ndarray,
    occ_pct: np.ndarray,
    block_threads: np.ndarray,
    dur_us: np.ndarray,
    overhead_us: float = OVERHEAD_US,
    round_weight: float = ROUND_WEIGHT,
    max_threads: float = MAX_THREADS_PER_SM,
) -> np.ndarray:
    """Estimated ``sm__cycles_active`` share of each kernel row, 0-1; NaN where blocks per SM are
    unknown (the figure is then unknown, as torch-tb-profiler's is)."""
    bps = bps.astype(np.float64)
    occ = np.nan_to_num(occ_pct.astype(np.float64), nan=0.0)
    resident = resident_blocks(bps, occ, block_threads.astype(np.float64), max_threads)
    cov = wave_coverage(bps, resident, round_weight)
    dur = dur_us.astype(np.float64)
    live = np.where(dur > 0, dur / (np.maximum(dur, 0.0) + overhead_us), 0.0)
    return np.where(np.isnan(bps), np.nan, cov * live)
