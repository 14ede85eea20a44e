# Sourced by the scripts in scripts/gpu/ (not a check of its own: run-all.sh runs scripts/gpu/*.sh).
# Sets root (the repository, also the working folder), out (NAME's log folder: $OUT/NAME, else a
# temporary one) and py (PYTHON, else python3).
#   source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib/common.sh" NAME
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../../.." && pwd)"
cd "$root"
if [ -n "${OUT:-}" ]; then out="$OUT/$1"; else out="$(mktemp -d "${TMPDIR:-/tmp}/vmmkit-$1.XXXXXX")"; fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
py="${PYTHON:-python3}"

# traces_or_default NAME [TRACE...]: sets traces to the arguments, else every trace in
# .device/traces/ (BERT first), else the repository's traces/*.csv.gz (BERT first); exits 2 naming NAME when
# one is missing or there is none.
traces_or_default() {
  local name="$1"; shift
  traces=("$@")
  if [ ${#traces[@]} -eq 0 ]; then
    if [ -f .device/traces/bert_infer.csv.gz ]; then
      traces=(.device/traces/bert_infer.csv.gz)
      for t in .device/traces/*.csv.gz; do [ "$t" = .device/traces/bert_infer.csv.gz ] || traces+=("$t"); done
    elif [ -f traces/bert_infer.csv.gz ]; then
      traces=(traces/bert_infer.csv.gz)
      for t in traces/*.csv.gz; do [ "$t" = traces/bert_infer.csv.gz ] || traces+=("$t"); done
    fi
  fi
  [ ${#traces[@]} -gt 0 ] || { echo "$name: no trace (give trace paths as arguments)"; exit 2; }
  for t in "${traces[@]}"; do
    [ -f "$t" ] || { echo "$name: no trace $t (give trace paths as arguments)"; exit 2; }
  done
}

# workload_script NAME: the program that runs workload NAME: jax_workloads.py for jax_* (JAX, every
# buffer from the device's default pool), else workloads.py (PyTorch).
workload_script() {
  case "$1" in
    jax_*) echo "$root/scripts/gpu/jax_workloads.py" ;;
    *) echo "$root/scripts/gpu/workloads.py" ;;
  esac
}

# use_vmmkit_build NAME: exits 2 naming NAME unless target/vmmkit.jar and the shim are built;
# points the shim at the jar, and at runtime/ (the jlink runtime and its AOT cache) when carried.
use_vmmkit_build() {
  local need
  for need in target/vmmkit.jar target/native/libvmmkit_preload.so; do
    [ -f "$need" ] || { echo "$1: $need is missing; build it (./mvnw -DskipTests package) and carry target/" >&2; exit 2; }
  done
  export VMMKIT_JAR="$root/target/vmmkit.jar"
  [ -x runtime/bin/java ] && export VMMKIT_JAVA_HOME="$root/runtime"
  [ -f runtime/vmmkit.aot ] && export VMMKIT_AOT_CACHE="$root/runtime/vmmkit.aot"
  return 0
}

# build_tms NAME: builds torch_memory_saver from its public source in .device/torch_memory_saver
# (TMS_CUDA_MAJOR, 13 by default) into $out/tms-site; sets tms_site, and have_tms to 1 when it built
# (0 when the source is missing or the build failed, which it says, naming NAME).
build_tms() {
  tms_site="$out/tms-site"
  have_tms=0
  if [ ! -f .device/torch_memory_saver/setup.py ]; then
    echo "$1: no .device/torch_memory_saver (carry its source): the anchor is missing"; return 0
  fi
  echo "=== building torch_memory_saver"
  rm -rf "$out/tms-src" && cp -r .device/torch_memory_saver "$out/tms-src"
  if TMS_CUDA_MAJOR="${TMS_CUDA_MAJOR:-13}" timeout 400 "$py" -m pip install --no-build-isolation --no-deps --no-index \
      --target "$tms_site" "$out/tms-src" > "$out/tms-build.log" 2>&1; then
    have_tms=1
  else
    echo "$1: torch_memory_saver did not build:"; tail -30 "$out/tms-build.log"
  fi
}

# find_cudart NAME DRIVER: sets cudart_dir and cudart (the library to link test programs against):
# the stand-in runtime in target/test-native for DRIVER=host, else CUDA's; exits 2 naming NAME when
# there is none.
find_cudart() {
  if [ "$2" = host ]; then
    cudart_dir="$root/target/test-native"
  else
    cudart_dir=""
    for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu; do
      if [ -e "$d/libcudart.so" ] || ls "$d"/libcudart.so.* >/dev/null 2>&1; then cudart_dir="$d"; break; fi
    done
  fi
  if [ -z "$cudart_dir" ]; then echo "$1: no libcudart found (set CUDA_HOME)" >&2; exit 2; fi
  cudart="$cudart_dir/libcudart.so"
  [ -e "$cudart" ] || cudart="$(ls "$cudart_dir"/libcudart.so.* | head -1)"
}

# ensure_aot_cache NAME: trains runtime/vmmkit.aot (the shim's AOT cache, scripts/build-aot-cache.sh)
# when runtime/ is carried and the cache is missing, was trained for another checkout path, or was
# trained on a machine without the NVIDIA driver (a runtime built elsewhere and carried here); on a
# GPU machine the training run allocates through CUDA, so the cache holds the driver's classes too.
# Prints what it did; a failed training only leaves the shim slower to start.
ensure_aot_cache() {
  [ -x runtime/bin/java ] || { echo "$1: no runtime/ carried: the JVM the shim starts has no AOT cache"; return 0; }
  if [ -f runtime/vmmkit.aot ] && [ "$(cat runtime/vmmkit.aot.jar 2>/dev/null)" = "$root/target/vmmkit.jar" ] \
     && [ "$(cat runtime/vmmkit.aot.driver 2>/dev/null)" = cuda ]; then
    echo "$1: AOT cache runtime/vmmkit.aot is this checkout's"; return 0
  fi
  echo "$1: training runtime/vmmkit.aot for this machine and checkout"
  timeout 120 bash scripts/build-aot-cache.sh runtime > "$out/aot.log" 2>&1 || echo "$1: AOT training failed (see $out/aot.log)"
}
