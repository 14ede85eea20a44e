#!/usr/bin/env bash
# JMH benchmark of the allocator's hot path (cache hits: no driver call) on the host emulation.
# Usage: scripts/bench-hotpath.sh [JMH options], e.g. -f 1 -wi 2 -i 3
exec "$(dirname "$0")/run-test-class.sh" org.openjdk.jmh.Main HotPathBenchmark "$@"
