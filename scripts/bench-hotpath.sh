#!/usr/bin/env bash
# JMH benchmark of the allocator's hot path (cache hits: no driver call) on the host emulation.
# Usage: scripts/bench-hotpath.sh [JMH options], e.g. -f 1 -wi 2 -i 3
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/java-home.sh
export JAVA_HOME="$(jdk25_home)"
./mvnw -B -q -DskipTests test-compile dependency:build-classpath -Dmdep.outputFile=target/test-classpath.txt
exec "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED \
  -cp "target/test-classes:target/classes:$(cat target/test-classpath.txt)" \
  org.openjdk.jmh.Main HotPathBenchmark "$@"
