#!/usr/bin/env bash
# Runs a main class from the test sources (benchmarks) with the test classpath.
# Usage: scripts/run-test-class.sh CLASS [ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/java-home.sh
export JAVA_HOME="$(jdk25_home)"
./mvnw -B -q -DskipTests test-compile dependency:build-classpath -Dmdep.outputFile=target/test-classpath.txt
exec "$JAVA_HOME/bin/java" --enable-native-access=ALL-UNNAMED \
  -cp "target/test-classes:target/classes:$(cat target/test-classpath.txt)" "$@"
