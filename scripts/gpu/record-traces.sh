#!/usr/bin/env bash
# Records real allocation traces and PyTorch memory snapshots on the GPU machine, as test data:
#   traces:    each workload of workloads.py (jax_*: jax_workloads.py) under `vmmkit run --trace` with PyTorch's cache off
#              (every tensor is one cudaMalloc/cudaFree, so the trace is the program's own requests);
#   snapshots: PyTorch's torch.cuda.memory._dump_snapshot with the caching allocator on, with and
#              without expandable segments, and one truncated by a small max_entries; each beside a
#              JSON line holding torch.cuda.max_memory_reserved() as the program printed it.
# Writes $OUT/record-traces/{traces.tar,snapshots.tar,summary.txt}. Usage (repository root, runtime/
# and target/ built): bash scripts/gpu/record-traces.sh [WORKLOAD...]; RECORD_TIMEOUT=S (100) bounds each
# recording, RECORD_TRACES_ONLY=1 leaves out the snapshots.
set -uo pipefail
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" record-traces
wl=scripts/gpu/workloads.py
work="$(mktemp -d)"
mkdir -p "$work/traces" "$work/snapshots"
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(gen_llama_b1 gen_llama_b8 gen_llama_long gen_gpt2_b4 gen_qwen2_b16 train_gpt2 unet_sample unet_train bert_varying resnet_varying)

[ -n "${RECORD_SNAPSHOTS_ONLY:-}" ] && names=()
for n in "${names[@]}"; do
  start=$(date +%s)
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout "${RECORD_TIMEOUT:-100}" ./vmmkit run --driver cuda --profile off \
    --trace "$work/traces/$n.csv.gz" --stats "$work/traces/$n.stats.json" -- "$py" "$(workload_script "$n")" "$n" \
    > "$work/traces/$n.out" 2> "$work/traces/$n.err"
  rc=$?
  tar -C "$work" -rf "$out/traces.tar" "traces/$n.csv.gz" "traces/$n.stats.json" "traces/$n.out" "traces/$n.err" 2>/dev/null
  echo "trace $n: exit $rc ($(( $(date +%s) - start )) s) $(tail -1 "$work/traces/$n.out") $(tail -2 "$work/traces/$n.err" | tr '\n' ' ' | cut -c1-300)" | tee -a "$out/summary.txt"
done

snap() { # NAME WORKLOAD MAX_ENTRIES ALLOC_CONF
  local start=$(date +%s)
  PYTORCH_CUDA_ALLOC_CONF="$4" timeout 100 "$py" "$wl" "$2" --snapshot "$work/snapshots/$1.pickle" \
    --max-entries "$3" > "$work/snapshots/$1.json" 2> "$work/snapshots/$1.err"
  local rc=$?
  gzip -f "$work/snapshots/$1.pickle" 2>/dev/null
  tar -C "$work" -rf "$out/snapshots.tar" "snapshots/$1.pickle.gz" "snapshots/$1.json" "snapshots/$1.err" 2>/dev/null
  echo "snapshot $1: exit $rc ($(( $(date +%s) - start )) s) $(cat "$work/snapshots/$1.json") $(tail -2 "$work/snapshots/$1.err" | tr '\n' ' ' | cut -c1-300)" | tee -a "$out/summary.txt"
}
if [ -n "${RECORD_TRACES_ONLY:-}" ]; then ls -la "$out"; exit 0; fi
snap train_gpt2 train_gpt2 2000000 ""
snap train_gpt2_expandable train_gpt2 2000000 "expandable_segments:True"
snap gen_llama_b8 gen_llama_b8 2000000 ""
snap gen_llama_b8_expandable gen_llama_b8 2000000 "expandable_segments:True"
snap unet_train unet_train 2000000 ""
snap gen_llama_b1_truncated gen_llama_b1 3000 ""

ls -la "$work/traces" "$work/snapshots" | tee -a "$out/summary.txt"
ls -la "$out"
