#!/usr/bin/env bash
# Installs Debian's `etcd-client` package (etcdctl 3.4, v3 API) for the
# etcd door's tests with the real client (tests/etcdctl.rs). Idempotent:
# does nothing when etcdctl is there.
set -euo pipefail
if command -v etcdctl >/dev/null 2>&1; then
    echo "etcdctl already installed"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends etcd-client
ETCDCTL_API=3 etcdctl version
