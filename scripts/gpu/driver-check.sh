#!/usr/bin/env bash
# The driver on the GPU (device 0): the conformance suite, the per-call latencies, and a replay of
# the BERT trace with --verify (a pattern written into every allocation and read back through the
# driver, so two live allocations never share memory). The trace comes from .device/traces/.
set -uo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.."
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
./vmmkit driver-check --driver cuda || exit 1
./vmmkit driver-bench --driver cuda || exit 1
trace=.device/traces/bert_infer.csv.gz
if [ -f "$trace" ]; then
  ./vmmkit replay --driver cuda --warmup 0 --verify "$trace" || exit 1
else
  echo "driver-check: no $trace; replay --verify skipped"
fi
