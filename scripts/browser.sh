#!/usr/bin/env bash
# Debian's Chromium for the dashboard's browser test (tests/system/test_dashboard.py): Playwright
# drives it by path, since its own browser download is not reachable. Does nothing when
# /usr/bin/chromium is there.
set -euo pipefail
[ -x /usr/bin/chromium ] && exit 0
export DEBIAN_FRONTEND=noninteractive
install() { apt-get install -y -q --no-install-recommends chromium; }
# The package lists may be missing or stale on a fresh machine: update only then.
install || { apt-get update -q && install; }
