#!/usr/bin/env bash
# Side-by-side benchmark: raftlock vs etcd 3.4 vs ZooKeeper 3.8, each a
# three-member cluster on 127.0.0.1 with default durability (fsync on),
# the same workloads for all three (crates/raftlock-bench), each rival on
# its fastest client: etcd over native gRPC, ZooKeeper over a lean
# pipelined client; and raftlock's ZooKeeper and etcd doors driven by
# those same clients (raftlock-zk, raftlock-etcd: latency workloads only,
# 3 unpinned runs). Latency workloads (uncontended, put, contended) run
# 3 times on fresh clusters, unpinned and pinned (members on CPU 0, load
# generator on CPU 1); scale (1 to 4,096 concurrent sessions) and herd on
# the first. Writes docs/benchmarks.md (the generated section),
# docs/bench/*.png and docs/bench/results.json. Not part of CI.
#
#   bench/compare.sh                 # full run, about 40 minutes on a quiet 2-core machine
#   bench/compare.sh --smoke         # every system and workload for a second or two, about
#                                    # 6 minutes; checks the harness, writes its report under
#                                    # /tmp only (its numbers mean nothing)
#   bench/compare.sh --long          # 100,000 sessions, 100,000 waiters on one lock (raftlock),
#                                    # 1,000,000-node restart, longer phases;
#                                    # writes docs/benchmarks-long.md and docs/bench/long/ instead
#   bench/compare.sh --long --skip-install -- --workloads sessions,restart   # only the long-only parts
#   bench/compare.sh --skip-install  # etcd and ZooKeeper already installed
#   bench/compare.sh -- --systems raftlock --workloads uncontended   # extra flags for raftlock-bench
#   bench/compare.sh -- --systems raftlock,etcd,etcd-gateway,zookeeper   # add etcd's JSON gateway row
#   KEEP_SCRATCH=1 bench/compare.sh  # keep the clusters' data and logs
#
# Needs root for apt-get (installs etcd-server, etcd-client and zookeeper).
# raftlock-bench's etcd gRPC rows (`etcd-grpc`, on by default) use the
# client stubs raftlock-etcd generates with protox, so no `protoc`.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
COMMAND="bench/compare.sh${*:+ $*}"

INSTALL=1
LONG=0
SMOKE=0
EXTRA=()
while [ $# -gt 0 ]; do
    case "$1" in
        --skip-install) INSTALL=0 ;;
        --long) LONG=1 ;;
        --smoke) SMOKE=1 ;;
        --) shift; EXTRA+=("$@"); break ;;
        -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
        *) echo "compare.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

say() { printf '\n== %s\n' "$*" >&2; }

if [ "$SMOKE" = 1 ] && [ "$LONG" = 1 ]; then
    echo "compare.sh: --smoke and --long do not go together" >&2
    exit 2
fi

if [ "$INSTALL" = 1 ]; then
    if ! command -v etcd >/dev/null || ! [ -f /usr/share/java/zookeeper.jar ]; then
        say "installing etcd 3.4 and ZooKeeper 3.8 from Debian packages"
        apt-get update
        DEBIAN_FRONTEND=noninteractive apt-get install -y etcd-server etcd-client zookeeper
    fi
fi
command -v etcd >/dev/null || { echo "compare.sh: etcd not found (drop --skip-install)" >&2; exit 1; }
[ -f /usr/share/java/zookeeper.jar ] || { echo "compare.sh: ZooKeeper not found (drop --skip-install)" >&2; exit 1; }
command -v java >/dev/null || { echo "compare.sh: java not found" >&2; exit 1; }

say "building raftlock and the load generator (release)"
cargo build --release -p raftlock-cli -p raftlock-bench --features raftlock-bench/etcd-grpc

say "machine"
echo "nproc: $(nproc)" >&2
grep -m1 'model name' /proc/cpuinfo >&2 || true
echo "load: $(cat /proc/loadavg)" >&2

# 10,000 ZooKeeper sessions are 10,000 sockets (the bench raises its soft
# limit to the hard one; servers inherit it).
ulimit -n 1048576 2>/dev/null || ulimit -n 65536 2>/dev/null || true

SCRATCH=$(mktemp -d /tmp/raftlock-bench.XXXXXX)
PIDFILE="$SCRATCH/pids"
BENCH_PID=""

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    if [ -n "$BENCH_PID" ] && kill -0 "$BENCH_PID" 2>/dev/null; then
        kill -TERM "$BENCH_PID" 2>/dev/null || true
        for _ in $(seq 1 30); do kill -0 "$BENCH_PID" 2>/dev/null || break; sleep 1; done
        kill -KILL "$BENCH_PID" 2>/dev/null || true
    fi
    # Every server the bench started, if still running (pids checked
    # against their command line, so a reused pid is left alone).
    if [ -f "$PIDFILE" ]; then
        while read -r pid _; do
            if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$SCRATCH"; then
                kill -KILL "$pid" 2>/dev/null || true
            fi
        done <"$PIDFILE"
    fi
    if [ "${KEEP_SCRATCH:-0}" = 1 ]; then
        echo "compare.sh: data and logs kept in $SCRATCH" >&2
    else
        rm -rf "$SCRATCH"
    fi
    exit "$status"
}
trap cleanup EXIT INT TERM

ARGS=(
    compare
    --raftlock-bin "$ROOT/target/release/raftlock"
    --etcd-bin "$(command -v etcd)"
    --java "$(command -v java)"
    --zk-classpath "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"
    --scratch "$SCRATCH"
    --pidfile "$PIDFILE"
    --record-command "$COMMAND"
)
# The long run has its own page, so the default run's stays as it is; a
# smoke run's numbers mean nothing, so its report stays in the scratch
# directory (kept) and the docs are not touched.
if [ "$SMOKE" = 1 ]; then
    KEEP_SCRATCH=1
    ARGS+=(--out-dir "$SCRATCH/report" --doc "$SCRATCH/report/benchmarks.md")
    ARGS+=(
        --runs 1 --pin both --no-self-check
        --clients 1,8 --put-clients 1,8 --contended-clients 4
        --uncontended-secs 1 --put-secs 1 --contended-secs 1
        --failover-secs 6 --failover-kill-at-secs 2
        --sessions 200 --sessions-window-secs 2
        --herd-waiters 1,20 --herd-rounds 3 --restart-nodes 500
        --scale-sessions 1,8,32 --scale-secs 1 --door-runs 1 --door-pin both
    )
elif [ "$LONG" = 1 ]; then
    ARGS+=(--out-dir "$ROOT/docs/bench/long" --doc "$ROOT/docs/benchmarks-long.md")
else
    ARGS+=(--out-dir "$ROOT/docs/bench" --doc "$ROOT/docs/benchmarks.md")
fi
if [ "$LONG" = 1 ]; then
    ARGS+=(
        --uncontended-secs 15 --contended-secs 20
        --failover-secs 30 --failover-kill-at-secs 10
        --sessions 10000,100000 --sessions-window-secs 30
        --herd-waiters 1,100,10000,100000 --herd-rounds 50 --restart-nodes 1000000
    )
    # 100,000 waiting long polls are 100,000 connections, a third of them
    # to each member: more than the default ephemeral port range gives.
    read -r LO HI </proc/sys/net/ipv4/ip_local_port_range
    if [ $((HI - LO + 1)) -lt 40000 ]; then
        echo "compare.sh: net.ipv4.ip_local_port_range is $LO $HI; the 100,000-waiter herd is" \
            "skipped unless it gives 40,000 ports (sysctl -w net.ipv4.ip_local_port_range='1024 65535')" >&2
    fi
fi
ARGS+=("${EXTRA[@]}")

say "running: raftlock-bench ${ARGS[*]}"
"$ROOT/target/release/raftlock-bench" "${ARGS[@]}" >"$SCRATCH/report.md" &
BENCH_PID=$!
wait "$BENCH_PID"
BENCH_PID=""
cat "$SCRATCH/report.md"
say "wrote the report (docs/benchmarks.md, or docs/benchmarks-long.md with --long) and its results.json and plots"
