#!/usr/bin/env bash
# The driver conformance suite on the GPU (device 0), then the per-call latencies.
set -uo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.."
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
./vmmkit driver-check --driver cuda || exit 1
./vmmkit driver-bench --driver cuda
