#!/usr/bin/env bash
# Builds runtime/: a trimmed Java 25 runtime (jlink) for machines without Java, such as the GPU
# machine. The launcher ./vmmkit uses runtime/bin/java when it exists.
#   bash scripts/build-runtime.sh            build the jar if needed, then runtime/
#   VMMKIT_EXTRA_MODULES=jdk.jfr,jdk.jcmd bash scripts/build-runtime.sh   add modules (profiling)
#   VMMKIT_DROP_MODULES= bash scripts/build-runtime.sh                    keep every module jdeps names
set -euo pipefail
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
cd "$root"

source scripts/java-home.sh
jdk="$(jdk25_home)"
if [ -z "$jdk" ] || [ ! -x "$jdk/bin/jlink" ]; then
  echo "build-runtime: no JDK 25 with jlink (looked in \$JAVA_HOME and /usr/lib/jvm/temurin-25-*)" >&2
  exit 2
fi
export JAVA_HOME="$jdk"

jar="target/vmmkit.jar"
# Rebuild when the jar is missing or older than any source, as the launcher does.
if [ ! -f "$jar" ] || [ -n "$(find src/main pom.xml -newer "$jar" -print -quit 2>/dev/null)" ]; then
  echo "build-runtime: building $jar" >&2
  ./mvnw -B -q -DskipTests package
fi

# Modules the shaded jar needs, as jdeps sees them, less two that only optional library code uses
# and that would add ~15 MB: java.desktop (Jackson's java.beans support, which it skips when
# absent) and java.compiler (Agrona's code generator, unused at run time). jdk.unsupported covers
# libraries that reach sun.misc.Unsafe reflectively, which jdeps cannot see.
drop=",${VMMKIT_DROP_MODULES:-java.desktop,java.compiler},"
modules=""
for m in $("$jdk/bin/jdeps" --ignore-missing-deps --print-module-deps --multi-release 25 "$jar" | tr ',' ' ') jdk.unsupported; do
  case "$drop" in *",$m,"*) continue ;; esac
  modules="${modules:+$modules,}$m"
done
modules="$modules${VMMKIT_EXTRA_MODULES:+,$VMMKIT_EXTRA_MODULES}"
echo "build-runtime: modules $modules" >&2

rm -rf runtime
"$jdk/bin/jlink" \
  --add-modules "$modules" \
  --strip-debug --no-man-pages --no-header-files --compress=zip-6 \
  --output runtime

# The runtime must start the CLI, or it is no use on a machine where it cannot be rebuilt.
runtime/bin/java -jar "$jar" --help >/dev/null

size_mb="$(du -sm runtime | cut -f1)"
echo "build-runtime: runtime/ is ${size_mb} MB ($(runtime/bin/java -version 2>&1 | head -1))" >&2
if [ "$size_mb" -gt 50 ]; then
  echo "build-runtime: warning: runtime/ is larger than 50 MB" >&2
fi

# The shim's JVM starts faster with an AOT cache trained on this runtime (vmmkit run passes it on).
scripts/build-aot-cache.sh runtime || echo "build-runtime: no AOT cache (the shim starts slower)" >&2
