#!/usr/bin/env bash
# One device call that records every issue-23/25/26 sample (one H200), run from a folder that holds
# sample_traces/ and validation/ (the repository root, or its copy):
#   bash validation/record_device.sh WORKDIR TARBALL
# Each phase has its own timeout; the tarball is rewritten after each phase, so a phase running out of
# time loses only itself.
set -u
W=${1:-/tmp/rec}
TAR=${2:-}
HERE=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$W/sample_traces" "$W/whatif_pairs"
pack() { if [ -n "$TAR" ]; then tar czf "$TAR" -C "$W" . && echo "packed $(du -h "$TAR" | cut -f1)"; fi; }
nvidia-smi -L
python3 -c 'import torch, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, torch.cuda.get_device_name(0))'
t0=$SECONDS
timeout "${T_MEMORY:-120}" python3 "$HERE/sample_traces/record_memory.py" --out "$W/sample_traces" ${MEMORY_ARGS:-}
echo "phase memory rc=$? t=$((SECONDS - t0))s"; pack
timeout "${T_PAIRS:-240}" python3 "$HERE/validation/record_whatif_pairs.py" --out "$W/whatif_pairs" ${PAIRS_ARGS:-}
echo "phase pairs rc=$? t=$((SECONDS - t0))s"; pack
timeout "${T_COMPILED:-210}" python3 "$HERE/sample_traces/record_compiled.py" --out "$W/sample_traces" ${COMPILED_ARGS:-}
echo "phase compiled rc=$? t=$((SECONDS - t0))s"; pack
find "$W" -name '*.gz' -printf '%s %p\n' | sort -n | tail -40
