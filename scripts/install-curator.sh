#!/usr/bin/env bash
# Installs Debian's Apache Curator 5.4 (libcurator-recipes-java: the
# framework, client and recipes jars, with guava, slf4j and ZooKeeper's
# client jar) and a JDK for the Curator suite run against the ZooKeeper
# door (crates/raftlock-zookeeper/tests/curator.rs). Idempotent: does
# nothing when javac and the jars are there.
set -euo pipefail
have_all() {
    command -v javac >/dev/null 2>&1 &&
        [ -f /usr/share/java/curator-recipes.jar ] &&
        [ -f /usr/share/java/curator-framework.jar ] &&
        [ -f /usr/share/java/curator-client.jar ] &&
        [ -f /usr/share/java/zookeeper.jar ] &&
        [ -f /usr/share/java/guava.jar ] &&
        [ -f /usr/share/java/slf4j-nop.jar ]
}
if have_all; then
    echo "javac and Curator already installed"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
    default-jdk-headless libcurator-recipes-java libslf4j-java libnetty-java libguava-java
have_all
