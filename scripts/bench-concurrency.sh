#!/usr/bin/env bash
# Eight threads on one manager: seven cache hits, one forcing slow-path growth on a driver that
# sleeps DELAY_US in every call (GPU-like). Prints the cache-hit threads' throughput and latency.
# Usage: scripts/bench-concurrency.sh [SECONDS=5] [DELAY_US=30]
exec "$(dirname "$0")/run-test-class.sh" dev.vmmkit.bench.ConcurrencyBenchmark "${1:-5}" "${2:-30}"
