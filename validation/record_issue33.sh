#!/usr/bin/env bash
# Issue 33's ground truth on one H100, in device calls of at most 10 minutes, run from a folder that holds
# sample_traces/ and validation/ (the repository root, or a copy of its scripts):
#   PHASES="mfu lightning" bash validation/record_issue33.sh WORKDIR TARBALL
#   PHASES="zoo pairs" bash validation/record_issue33.sh WORKDIR TARBALL
# Phases: mfu (validation/mfu_truth), lightning (its Lightning run), zoo (validation/sm_zoo: torch.profiler,
# then Nsight Compute), pairs (validation/gain_pairs). Each has its own timeout; the tarball is rewritten
# after each phase, so a phase running out of time loses only itself.
set -u
W=${1:-/tmp/rec33}
TAR=${2:-}
HERE=$(cd "$(dirname "$0")/.." && pwd)
V="$HERE/validation"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
mkdir -p "$W"
pack() { if [ -n "$TAR" ]; then tar czf "$TAR" -C "$W" . && echo "packed $(du -h "$TAR" | cut -f1)"; fi; }
nvidia-smi -L
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv
python3 -c 'import torch, triton, transformers, lightning; print("torch", torch.__version__, "cuda", torch.version.cuda,
"cudnn", torch.backends.cudnn.version(), "triton", triton.__version__, "transformers", transformers.__version__,
"lightning", lightning.__version__, torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0).multi_processor_count)'
t0=$SECONDS
for phase in ${PHASES:-mfu lightning zoo pairs}; do
  if [ $((SECONDS - t0)) -gt "${DEADLINE:-100000}" ]; then echo "phase $phase skipped: past DEADLINE"; continue; fi
  case $phase in
  mfu)
    timeout "${T_MFU:-330}" python3 "$V/record_mfu_truth.py" --out "$W/mfu_truth" ${MFU_ARGS:-} ;;
  lightning)
    timeout "${T_LIGHTNING:-150}" python3 "$V/record_lightning_truth.py" --out "$W/mfu_truth" ${LIGHTNING_ARGS:-} ;;
  zoo)
    Z="$W/sm_zoo"; mkdir -p "$Z"
    timeout "${T_ZOO_TRACE:-90}" python3 "$V/sm_zoo.py" --mode trace --out "$Z"
    echo "zoo trace rc=$? t=$((SECONDS - t0))s"; pack
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
    "$NCU" --version | tail -1
    M=sm__cycles_active.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,sm__cycles_active.avg
    M=$M,sm__cycles_active.max,sm__cycles_elapsed.avg,launch__waves_per_multiprocessor,launch__grid_size
    M=$M,launch__block_size,launch__registers_per_thread,launch__shared_mem_per_block_static
    M=$M,launch__shared_mem_per_block_dynamic,launch__sm_count,launch__occupancy_limit_blocks
    M=$M,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__occupancy_limit_warps
    M=$M,sm__maximum_warps_per_active_cycle_pct,sm__warps_active.avg.pct_of_peak_sustained_active
    CORE=sm__cycles_active.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,launch__grid_size,launch__block_size
    NCU_OPTS="--clock-control none --cache-control none --profile-from-start off --page raw --csv --print-units base"
    echo "$NCU $NCU_OPTS --metrics $M" > "$Z/ncu_command.txt"
    for part in cases steps; do
      timeout "${T_ZOO_NCU:-150}" "$NCU" $NCU_OPTS --metrics "$M" --log-file "$Z/ncu_$part.csv" \
        python3 "$V/sm_zoo.py" --mode ncu --part $part
      echo "zoo ncu $part rc=$? t=$((SECONDS - t0))s"; pack
      if ! grep -q '^"ID"' "$Z/ncu_$part.csv" 2>/dev/null; then  # a metric this ncu lacks: the core set alone
        head -c 2000 "$Z/ncu_$part.csv" 2>/dev/null
        echo "retry with $CORE" >> "$Z/ncu_command.txt"
        timeout 120 "$NCU" $NCU_OPTS --metrics "$CORE" --log-file "$Z/ncu_$part.csv" \
          python3 "$V/sm_zoo.py" --mode ncu --part $part
      fi
    done
    python3 "$V/sm_zoo_match.py" "$Z" ;;
  pairs)
    timeout "${T_PAIRS:-330}" python3 "$V/record_gain_pairs.py" --out "$W/gain_pairs" --trace-limit 700000 \
      ${PAIRS_ARGS:-} ;;
  esac
  echo "phase $phase rc=$? t=$((SECONDS - t0))s"; pack
done
find "$W" -name '*.gz' -printf '%s %p\n' | sort -n | tail -50
