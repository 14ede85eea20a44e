#!/usr/bin/env bash
# Runs a python script with llama.cpp's gguf package (from the npm package; scripts/fetch-llama-cpp.sh
# fetches it) on PYTHONPATH, under the first python3 that has numpy and yaml:
#   scripts/gguf-python.sh SCRIPT.py [ARG...]
# Exits 3, saying why, when there is no gguf package or no such python (Debian: python3-numpy python3-yaml).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
gguf_py="${LLAMA_GGUF_PY:-$(ls -d "$root"/.deps/llama.cpp/*/gguf-py 2>/dev/null | tail -n 1)}"
if [ -z "$gguf_py" ] || [ ! -d "$gguf_py" ]; then
  echo "gguf-python: no gguf package: run scripts/fetch-llama-cpp.sh first (or set LLAMA_GGUF_PY)" >&2
  exit 3
fi
# A pyenv or venv python may lack what Debian's has, or the other way round.
for python in python3 /usr/bin/python3; do
  if command -v "$python" >/dev/null 2>&1 && "$python" -c 'import numpy, yaml' 2>/dev/null; then
    PYTHONPATH="$gguf_py" exec "$python" "$@"
  fi
done
echo "gguf-python: no python3 with numpy and yaml (Debian: apt-get install python3-numpy python3-yaml)" >&2
exit 3
