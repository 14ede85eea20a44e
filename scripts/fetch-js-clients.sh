#!/usr/bin/env bash
# Installs, pinned, from the npm registry into .deps/js-clients/node_modules (git-ignored):
#   openai, ollama      the official JavaScript clients; ServeClientsTest runs src/test/js/clients.mjs
#                       with them against `vmmkit serve`
#   kubernetes-models, @kubernetes-models/prometheus-operator, yaml
#                       the Kubernetes API's schemas; DeployManifestsTest validates deploy/kubernetes.yaml
#                       with them (src/test/js/validate-k8s.mjs)
# Idempotent. Needs node and npm (Debian: apt-get install npm);
# exits 0 with a reason on stderr when they are missing, so the test skips and says why.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/.deps/js-clients"
openai=4.104.0   # openai (Apache-2.0)
ollama=0.5.18    # ollama (MIT)
k8s="kubernetes-models@5.1.0 @kubernetes-models/prometheus-operator@6.0.0 yaml@2.9.1"   # Apache-2.0, Apache-2.0, ISC

say() { echo "fetch-js-clients: $*" >&2; }
if [ -f "$dest/.complete-$openai-$ollama" ]; then exit 0; fi
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  say "node/npm are not installed (Debian: apt-get install npm); the client test will be skipped"
  exit 0
fi
mkdir -p "$dest"
[ -f "$dest/package.json" ] || echo '{"private": true, "description": "test clients for vmmkit serve"}' > "$dest/package.json"
if (cd "$dest" && npm install --no-audit --no-fund --loglevel=error "openai@$openai" "ollama@$ollama" $k8s >&2); then
  touch "$dest/.complete-$openai-$ollama"
else
  say "npm install of openai@$openai, ollama@$ollama and $k8s failed; the tests that use them will be skipped"
fi
exit 0
