#!/usr/bin/env bash
# The Jepsen-style end-to-end checks of raftlock, for CI (.ci/run) and for
# anyone before a merge. See jepsen/README.md, "CI".
#
#   1. build the real binary (target/debug/raftlock) and the injected-bug
#      build (target/injected/debug/raftlock: linearizable reads served
#      without a read index);
#   2. run jepsen/tests/cluster.rs: each workload (mutex, fenced,
#      register; rwlock and semaphore under `all`) for 15 s under mixed faults must be
#      valid, rwlock with its injected client bug (write holds taken in
#      read mode) must be caught (rwlock-exclusion INVALID), semaphore
#      likewise (under `all`; bug: odd clients on a second semaphore,
#      semaphore-limit INVALID), lock-delay (mutex with a 1 s delay under
#      client pauses and leader faults: no grant inside a delay; bug:
#      clients that ask for no delay, lock-delay INVALID), multilock (transfers under
#      multi-locks conserve the total; bug: transfers locking one account,
#      multilock-conservation INVALID), the four primitive workloads
#      with clients embedded in the members (valid, with grants; the
#      rwlock bug caught through them too), the lock
#      workloads under `isolate-leader` (sticky and embedded clients) must
#      be valid, and the register workload with the leader-isolating
#      partition must catch the injected bug (exit code 1, linearizability
#      INVALID);
#   3. run jepsen/tests/isolated_leader.rs, the isolated-leader regression
#      scenario (a client on a cut-off leader must observe its loss before
#      the majority grants its lock to another client);
#   4. run jepsen/tests/membership.rs: mutex and register for 20 s while
#      the `membership` nemesis adds spare members (`raftlock serve
#      --join`) and removes voters (the leader too) must be valid, with
#      adds and removals completed; and mutex with membership changes
#      between kills, pauses and partitions; and mutex for 30 s under
#      `membership,disk` (with root also `disk-fill`) from four founders
#      and no spare ids, so a member is removed and added back as a
#      `raftlock-jepsen member --join` process with an empty disk, with
#      the re-adds completed;
#   5. run jepsen/tests/disk.rs: mutex for 20 s under the disk nemeses
#      (`disk-full`: a member's next log sync fails with ENOSPC, a clean
#      stop, restarted when the fault ends; `slow-fsync`: its syncs take
#      100-300 ms longer), register under disk faults, kills and
#      partitions, and mutex under `disk-fill` (a real full tmpfs under a
#      member, root only), must be valid, and the faults must have reached
#      the members' disk path (about 2 min);
#   6. run jepsen/tests/combinations.rs: the clusters of `all,disk`
#      (sticky and embedded clients) and of `membership` alone (with root
#      plus `disk-fill`) start, a spare joins, a founder is removed and
#      added back, and the joined members take disk faults (about 5 s);
#   7. run jepsen/tests/zk_mutex.rs: ZooKeeper's lock recipe through the
#      members' ZooKeeper doors, fenced by the lock node's czxid, for 15 s
#      under `all` and 15 s under `disk` (member processes) must be
#      valid, and with its injected client bug (a
#      waiter that takes its predecessor's deletion for the lock without
#      listing again) must be caught (linearizable(mutex) INVALID), 10 s;
#   8. run jepsen/tests/etcd_mutex.rs: etcd's lock recipe (clientv3's
#      concurrency.Mutex) over gRPC through the members' etcd doors,
#      fenced by the lock key's create revision, for 15 s under `all`
#      and 15 s under `disk` must be valid, with no grant after the client saw its lease end
#      and every grant read back from the door's history at its revision
#      (its key alive, no older key left), and with its injected client
#      bug (a waiter that takes its predecessor's deletion for the lock
#      without reading again) must be caught (linearizable(mutex) and
#      lease-grant(door history) INVALID), 10 s; about 35 s in all.
#
# How the injected build is made (JEPSEN_INJECTED_BUILD):
#   target-dir  (default outside CI) `--target-dir target/injected`: never
#               touches target/debug, but a cold target/injected costs a
#               full dependency build (~3.5 min on 2 cores) the first time;
#   copy        (default when CI=true) build with the feature in target/
#               itself (only raftlock-node/-server/-cli recompile), copy
#               the binary to target/injected/debug/raftlock, rebuild
#               without the feature. target/debug/raftlock is the buggy one
#               for a moment: only for a machine nobody else is testing on.
#
# Reports of these runs land in target/tmp/jepsen-store/ (the newest under
# target/tmp/jepsen-store/latest). About 7 minutes of tests after the
# builds.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${CI:-}" == "true" ]]; then
    mode="${JEPSEN_INJECTED_BUILD:-copy}"
else
    mode="${JEPSEN_INJECTED_BUILD:-target-dir}"
fi
feature=(--features raftlock-node/inject-stale-reads)

echo "== jepsen: injected-bug build ($mode)"
case "$mode" in
    target-dir)
        cargo build --locked -p raftlock-cli "${feature[@]}" --target-dir target/injected
        ;;
    copy)
        cargo build --locked -p raftlock-cli "${feature[@]}"
        mkdir -p target/injected/debug
        cp target/debug/raftlock target/injected/debug/raftlock
        ;;
    *)
        echo "JEPSEN_INJECTED_BUILD must be target-dir or copy, not $mode" >&2
        exit 2
        ;;
esac
echo "== jepsen: cargo build -p raftlock-cli"
cargo build --locked -p raftlock-cli
if cmp -s target/debug/raftlock target/injected/debug/raftlock; then
    echo "error: target/debug/raftlock is still the injected build" >&2
    exit 1
fi

echo "== jepsen: workloads under faults, and the injected bug"
cargo test --locked -p raftlock-jepsen --test cluster -- --ignored --test-threads=1 --nocapture
echo "== jepsen: isolated-leader regression (sticky client)"
cargo test --locked -p raftlock-jepsen --test isolated_leader -- --ignored --nocapture
echo "== jepsen: membership changes under load"
cargo test --locked -p raftlock-jepsen --test membership -- --ignored --test-threads=1 --nocapture
echo "== jepsen: disk nemeses"
cargo test --locked -p raftlock-jepsen --test disk -- --ignored --test-threads=1 --nocapture
echo "== jepsen: nemesis combinations start together"
cargo test --locked -p raftlock-jepsen --test combinations -- --ignored --test-threads=1 --nocapture
echo "== jepsen: zk-mutex through the ZooKeeper doors, and its injected bug"
cargo test --locked -p raftlock-jepsen --test zk_mutex -- --ignored --test-threads=1 --nocapture
echo "== jepsen: etcd-mutex through the etcd doors, and its injected bug"
cargo test --locked -p raftlock-jepsen --test etcd_mutex -- --ignored --test-threads=1 --nocapture
