#!/usr/bin/env bash
# Installs Debian's `etcd-client` (etcdctl 3.4, v3 API) and `etcd-server`
# (etcd 3.4) packages for the etcd door's tests with the real client and
# its cross-check against a real etcd (tests/etcdctl.rs). Idempotent: does
# nothing when both are there.
set -euo pipefail
if command -v etcdctl >/dev/null 2>&1 && command -v etcd >/dev/null 2>&1; then
    echo "etcdctl and etcd already installed"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends etcd-client etcd-server
ETCDCTL_API=3 etcdctl version
etcd --version
