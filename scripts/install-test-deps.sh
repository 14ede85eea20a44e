#!/usr/bin/env bash
# Installs what the test suite needs beyond the JDK and gcc: Chromium, which renders the HTML
# memory report in a test (Debian's package, headless). Run by `./vmmkit test`. Needs root for
# apt-get; without it, or without network, the browser test is skipped and says why.
set -uo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-test-deps: chromium is missing and this is not root with apt-get; the HTML report's browser test will be skipped" >&2
  exit 0
fi
echo "install-test-deps: installing chromium (headless browser for the HTML report test)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1; then
  apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 \
    || echo "install-test-deps: could not install chromium; the browser test will be skipped" >&2
fi
exit 0
