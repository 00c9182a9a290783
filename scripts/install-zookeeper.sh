#!/usr/bin/env bash
# Installs Debian's `zookeeper` package (ZooKeeper 3.8 and a Java runtime)
# for the ZooKeeper wire codec's tests against a real server
# (crates/raftlock-zookeeper/tests/real_zookeeper.rs). Idempotent: does
# nothing when java and ZooKeeper's jar are there.
set -euo pipefail
if command -v java >/dev/null 2>&1 && [ -f /usr/share/java/zookeeper.jar ]; then
    echo "java and zookeeper already installed"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends zookeeper
command -v java >/dev/null
test -f /usr/share/java/zookeeper.jar
