#!/usr/bin/env bash
# Debian's headless Chromium, which tests/workflow/browser.py opens the Snakemake report in.
# Idempotent: installs only when `chromium` is missing.  Needs root and Debian's archive (apt-get).
set -euo pipefail
command -v chromium >/dev/null && exit 0
export DEBIAN_FRONTEND=noninteractive
log=/tmp/ring-chromium-apt.log
{
    apt-get update -qq &&
        apt-get install -y -qq -o Dpkg::Use-Pty=0 --no-install-recommends chromium
} >"$log" 2>&1 || {
    tail -n 20 "$log" >&2
    echo "chromium: apt-get failed (full log: $log)" >&2
    exit 1
}
