#!/usr/bin/env bash
# Regenerate every sample trace on a host with >= 2 GPUs (recorded on 2x H200).
#   bash sample_traces/record_all.sh WORKDIR [TAR]
# Writes run directories under WORKDIR; if TAR is given, (re)packs WORKDIR into it after
# each phase so a later phase running out of time does not lose earlier results.
set -u
WORK=${1:-sample_traces}
TAR=${2:-}
# extra arguments for every recorder, e.g. SAMPLE_ARGS="--device cpu --tiny --compile-backend aot_eager"
# for a CPU dry run (torchrun then uses gloo)
read -r -a XA <<< "${SAMPLE_ARGS:-}"
# PHASES: any of single multi large pp compile memory compiled (default all but large); NGPU: ranks for the multi-GPU runs
PHASES=" ${PHASES:-single multi pp compile memory compiled} "
NGPU=${NGPU:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
# NVLink multicast stays off (shared hosts)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p "$WORK"
pack() { if [ -n "$TAR" ]; then tar cf "$TAR" -C "$WORK" . && echo "packed $(du -h "$TAR" | cut -f1)"; fi; }

nvidia-smi -L; nvidia-smi topo -m 2>/dev/null | head -5
python3 -c 'import torch, torchvision, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "tv", torchvision.__version__, "triton", triton.__version__, "gpus", torch.cuda.device_count())'

t0=$SECONDS
if [[ $PHASES == *" single "* ]]; then
timeout "${T_SINGLE:-200}" python3 "$HERE/record_samples.py" --out "$WORK" "${XA[@]}" \
  --only gpt_naive_attention,gpt_sdpa_fused,resnet50_bf16,tiny_mlp_launch_bound,pageable_copy_loop,dataloader_stall,fp32_no_tensor_cores,low_sm_efficiency,small_copies,gpt_checkpointing
echo "phase single rc=$? t=$((SECONDS - t0))s"; pack
fi

if [[ $PHASES == *" multi "* ]]; then
# tpdp (2-D mesh, tp=2 inside pairs, FSDP2 across pairs) only where there are >= 2 pairs
STRATS="ddp fsdp2 tp"; if [ "$NGPU" -ge 4 ] && [ $((NGPU % 2)) -eq 0 ]; then STRATS="$STRATS tpdp"; fi
for s in $STRATS; do
  timeout "${T_MULTI:-80}" torchrun --standalone --nproc_per_node "$NGPU" "$HERE/record_multi_gpu.py" --strategy "$s" --out "$WORK" "${XA[@]}"
  echo "phase $s rc=$? t=$((SECONDS - t0))s"; pack
done
fi

if [[ $PHASES == *" large "* ]]; then
# issue 38 (not in the default PHASES: it wants NGPU=8): a 2.09 B-parameter GPT under DDP, FSDP2 and TP x DP
# (TP degree TP_LARGE, default 2) on NGPU ranks (record_large_multi_gpu.py; one GPU: TP_LARGE=1)
for s in ddp fsdp2 tpdp; do
  timeout "${T_LARGE:-180}" torchrun --standalone --nproc_per_node "$NGPU" "$HERE/record_large_multi_gpu.py" --strategy "$s" \
    --tp "${TP_LARGE:-2}" --out "$WORK" "${XA[@]}"
  echo "phase large $s rc=$? t=$((SECONDS - t0))s"; pack
done
fi

if [[ $PHASES == *" pp "* ]]; then
# pipeline parallelism over 2 ranks (record_pipeline.py): GPipe, 1F1B, interleaved 1F1B
for s in gpipe 1f1b interleaved; do
  timeout "${T_PP:-120}" torchrun --standalone --nproc_per_node 2 "$HERE/record_pipeline.py" --schedule "$s" --out "$WORK" "${XA[@]}"
  echo "phase pp $s rc=$? t=$((SECONDS - t0))s"; pack
done
fi

if [[ $PHASES == *" compile "* ]]; then
timeout "${T_COMPILE:-150}" python3 "$HERE/record_samples.py" --out "$WORK" --only gpt_compile "${XA[@]}"
echo "phase compile rc=$? t=$((SECONDS - t0))s"; pack
fi

if [[ $PHASES == *" memory "* ]]; then
# issue 25: profile_memory=True runs (gpt_memory, gpt_memory_checkpointing, gpt_memory_batch2x, memory_leak)
timeout "${T_MEMORY:-120}" python3 "$HERE/record_memory.py" --out "$WORK" "${XA[@]}"
echo "phase memory rc=$? t=$((SECONDS - t0))s"; pack
fi

if [[ $PHASES == *" compiled "* ]]; then
# issue 23: gpt_compile_reduce_overhead, gpt_flex_attention, gpt_flex_attention_full
timeout "${T_COMPILED:-240}" python3 "$HERE/record_compiled.py" --out "$WORK" "${XA[@]}"
echo "phase compiled rc=$? t=$((SECONDS - t0))s"; pack
fi
ls -laR "$WORK" | grep -E 'gz|json|/' 
