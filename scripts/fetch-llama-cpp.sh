#!/usr/bin/env bash
# Fetches llama.cpp, pinned, from the npm registry into .deps/llama.cpp/VERSION/ (git-ignored), and
# builds the llama engine plugin (examples/llama-engine) into target/engines/llama/cpu/:
#   node-llama-cpp               llama.cpp's source as a git bundle (llama.h, ggml, the python gguf writer)
#   @node-llama-cpp/linux-x64    prebuilt libllama/libggml for x64 CPUs, built from that same source
# What it leaves in .deps/llama.cpp/VERSION/:
#   include/   llama.h and ggml's headers, from the bundle
#   lib/       the prebuilt CPU libraries (the plugin's RUNPATH points here)
#   gguf-py/   the gguf writer (scripts/tiny-gguf.sh)
#   source.tar.xz  the source tree a CUDA build needs (scripts/gpu/llama.sh; machines without network)
# Idempotent: a complete folder is kept. Needs npm (Debian: apt-get install npm), git, tar, xz.
# Exits 0 with a reason on stderr when something is missing, so the tests that need it skip and say why.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="${LLAMA_NPM_VERSION:-3.22.1}"
dest="$root/.deps/llama.cpp/$version"

say() { echo "fetch-llama-cpp: $*" >&2; }

check_abi() {
  # Every function llama.h declares must be exported by the prebuilt libllama of the same version:
  # the libraries and the header come from one llama.cpp release, and this proves it.
  local missing
  missing=$(grep -vE '^\s*//' "$dest/include/llama.h" | grep -oE 'LLAMA_API[^(]*\b(llama_[a-z0-9_]+)\s*\(' \
              | grep -oE 'llama_[a-z0-9_]+\s*\($' | tr -d '( ' | sort -u \
              | comm -23 - <(nm -D --defined-only "$dest"/lib/libllama*.so | awk '{print $3}' | sort -u))
  if [ -n "$missing" ]; then
    say "the prebuilt libllama does not export what llama.h declares: $(echo $missing | head -c 300)"
    return 1
  fi
}

# The folder's layout: a folder made by an older layout of this script is made again.
layout=2   # 2: source.tar.xz holds scripts/ (llama-server's build reads scripts/ui-assets.cmake)
if [ "$(cat "$dest/.complete" 2>/dev/null)" != "$layout" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    say "npm is not installed (Debian: apt-get install npm); the llama engine is not built and its tests will be skipped"
    exit 0
  fi
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  say "fetching node-llama-cpp@$version and @node-llama-cpp/linux-x64@$version from the npm registry"
  if ! (cd "$work" && npm pack --silent "node-llama-cpp@$version" "@node-llama-cpp/linux-x64@$version" >/dev/null 2>"$work/npm.log"); then
    say "npm pack failed ($(tail -n 3 "$work/npm.log" | tr '\n' ' ')); the llama engine tests will be skipped"
    exit 0
  fi
  tar -xzf "$work/node-llama-cpp-$version.tgz" -C "$work" package/llama/gitRelease.bundle || exit 0
  mkdir -p "$work/bins" && tar -xzf "$work/node-llama-cpp-linux-x64-$version.tgz" -C "$work/bins" || exit 0
  git clone -q "$work/package/llama/gitRelease.bundle" "$work/src" 2>/dev/null || { say "cannot clone the source bundle"; exit 0; }
  rm -rf "$dest" && mkdir -p "$dest/include" "$dest/lib"
  cp "$work"/src/include/llama.h "$work"/src/ggml/include/*.h "$work"/src/ggml/src/ggml-backend-impl.h "$dest/include/"
  cp -r "$work/src/gguf-py" "$dest/gguf-py"
  cp -P "$work"/bins/package/bins/linux-x64/lib*.so "$dest/lib/"
  rm -f "$dest"/lib/libllama-common.so   # the C++ helpers of llama.cpp's own tools: not used
  (cd "$work/src" && git archive --format=tar HEAD CMakeLists.txt cmake common ggml include src tools vendor gguf-py scripts LICENSE licenses) \
    | xz -T2 -6 > "$dest/source.tar.xz"
  (cd "$work/src" && git rev-parse HEAD) > "$dest/COMMIT"
  cat "$work/bins/package/bins/linux-x64/_nlcBuildMetadata.json" > "$dest/BUILD.json"
  check_abi || { rm -rf "$dest"; exit 0; }
  echo "$layout" > "$dest/.complete"
  say "llama.cpp $version in $dest ($(du -sh "$dest" | cut -f1))"
fi

# The plugin, for `vmmkit serve --engines target/engines` (the Maven build makes the same one).
make -s -C "$root/examples/llama-engine" install LLAMA_DIR="$dest" ENGINES="$root/target/engines" >&2 \
  || say "building examples/llama-engine failed"
exit 0
