#!/usr/bin/env bash
# Installs headless Chromium and its WebDriver (Debian packages `chromium`
# and `chromium-driver`) for the dashboard's browser test
# (tests/ui_browser.rs). Idempotent: does nothing when both are on the PATH.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    echo "chromium and chromedriver already installed"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core
command -v chromium >/dev/null
command -v chromedriver >/dev/null
