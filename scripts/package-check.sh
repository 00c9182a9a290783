#!/usr/bin/env bash
# The Debian package on this machine, as an operator uses it: build it
# (scripts/build-deb.sh, from the dev binary `cargo test` already built),
# `dpkg -i` it, check the files, the raftlock user, /var/lib/raftlock and
# its mode, `man raftlock-lock` and bash completion; edit the conffile and
# start one member from it as the raftlock user (not through systemd, which
# CI does not run); upgrade to a higher version (the edit is kept, so is
# the member's data); remove (config and data stay); purge (config, user,
# group and data gone, and nothing else: the file listing of /etc, /usr,
# /var/lib and /opt is what it was before the install).
#
# Needs root (dpkg -i). Refuses to run where a raftlock package is already
# installed: it would be replaced and then purged.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS

fail() {
    echo "package check: $*" >&2
    exit 1
}
[ "$(id -u)" = 0 ] || fail "needs root (dpkg -i); run it as root or in CI"
if dpkg-query -W -f='${Status}' raftlock 2>/dev/null | grep -q "installed\|config-files"; then
    fail "a raftlock package is already on this machine; this check would replace and purge it"
fi

target="${CARGO_TARGET_DIR:-$PWD/target}"
out="$target/deb-check"
rm -rf "$out"
# The dev binary `cargo test --workspace` built (as scripts/verify-systemd-unit.sh).
binary="$target/debug/raftlock"
[ -x "$binary" ] || cargo build --locked -p raftlock-cli
deb="$(bash scripts/build-deb.sh --profile dev --binary "$binary" --out "$out")"
version="$(dpkg-deb -f "$deb" Version)"
deb_next="$(bash scripts/build-deb.sh --profile dev --binary "$binary" --out "$out" --version "$version+check1")"
echo "built $deb and $deb_next in $((SECONDS - started)) s"

scratch="$(mktemp -d)"
member=""
cleanup() {
    if [ -n "$member" ]; then
        kill "$member" 2>/dev/null || true
        wait "$member" 2>/dev/null || true
    fi
    rm -rf "$scratch"
    # Leave no package behind, whatever failed.
    if dpkg-query -W raftlock >/dev/null 2>&1; then
        dpkg --purge raftlock >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT

# What is on disk before; dpkg's and apt's own records, caches and logs
# change with any install.
listing() {
    find /etc /usr /var/lib /opt -xdev \
        \( -path /var/lib/dpkg -o -path /var/lib/apt -o -path /var/lib/man-db \
        -o -path /var/lib/systemd \) -prune -o -print 2>/dev/null \
        | grep -v -x -E '/etc/(passwd|group|shadow|gshadow|subuid|subgid)-' | sort
}
listing > "$scratch/before"

echo "== dpkg -i $(basename "$deb")"
dpkg -i "$deb"
[ "$(/usr/bin/raftlock --version)" = "raftlock $(cargo metadata --no-deps --format-version 1 --locked \
    | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="raftlock-cli"))')" ] \
    || fail "raftlock --version: $(/usr/bin/raftlock --version)"
/usr/bin/raftlock --version

for path in /usr/bin/raftlock /usr/lib/systemd/system/raftlock.service /etc/raftlock/cluster.toml \
    /etc/raftlock/raftlock.env /usr/share/man/man1/raftlock.1.gz /usr/share/man/man1/raftlock-lock.1.gz \
    /usr/share/man/man1/raftlock-snapshot-save.1.gz /usr/share/bash-completion/completions/raftlock \
    /usr/share/zsh/vendor-completions/_raftlock /usr/share/fish/vendor_completions.d/raftlock.fish \
    /usr/share/doc/raftlock/examples/production-5.toml; do
    dpkg -L raftlock | grep -q -x "$path" || fail "dpkg -L raftlock lacks $path"
done
conffiles="$(dpkg-query -W -f='${Conffiles}' raftlock)"
for path in /etc/raftlock/cluster.toml /etc/raftlock/raftlock.env; do
    grep -q " $path " <<<"$conffiles" || fail "$path is not a conffile: $conffiles"
done
grep -q '^ExecStart=/usr/bin/raftlock serve' /usr/lib/systemd/system/raftlock.service \
    || fail "the unit does not start /usr/bin/raftlock"

IFS=: read -r _ _ uid gid _ home shell < <(getent passwd raftlock) || fail "no raftlock user"
[ "$uid" -lt 1000 ] || fail "raftlock is not a system user (uid $uid)"
[ "$home" = /var/lib/raftlock ] && [ "$shell" = /usr/sbin/nologin ] \
    || fail "raftlock user: home $home, shell $shell"
[ "$(getent group raftlock | cut -d: -f3)" = "$gid" ] || fail "no raftlock group"
[ "$(stat -c '%U:%G %a' /var/lib/raftlock)" = "raftlock:raftlock 700" ] \
    || fail "/var/lib/raftlock: $(stat -c '%U:%G %a' /var/lib/raftlock)"
echo "user raftlock (uid $uid), /var/lib/raftlock raftlock:raftlock 0700"

echo "== man pages and completions"
man -w raftlock-lock | grep -q '^/usr/share/man/man1/raftlock-lock.1.gz$' \
    || fail "man -w raftlock-lock: $(man -w raftlock-lock 2>&1)"
MANPAGER=cat MANWIDTH=80 man raftlock-lock 2>/dev/null | grep -q -- '--wait' \
    || fail "man raftlock-lock does not show --wait"
MANPAGER=cat MANWIDTH=80 man raftlock 2>/dev/null | grep -q 'raftlock-lock(1)' \
    || fail "man raftlock does not point to raftlock-lock(1)"
# Bash completion as the shell runs it: complete `raftlock lo<TAB>`.
words="$(bash -c '
    source /usr/share/bash-completion/completions/raftlock
    spec="$(complete -p raftlock)" || exit 1
    fn="$(sed -E "s/.*-F ([^ ]+).*/\1/" <<<"$spec")"
    COMP_WORDS=(raftlock lo); COMP_CWORD=1; COMP_LINE="raftlock lo"; COMP_POINT=${#COMP_LINE}
    "$fn" raftlock lo raftlock
    printf "%s\n" "${COMPREPLY[@]}"')" || fail "bash completion does not load"
for word in lock locks lock-info; do
    grep -q -x -- "$word" <<<"$words" || fail "bash: raftlock lo<TAB> offers no $word: $words"
done
echo "man raftlock-lock works; bash completes raftlock lo<TAB> to $(tr '\n' ' ' <<<"$words")"
for shell in zsh fish; do
    if command -v "$shell" >/dev/null; then
        file=$([ "$shell" = zsh ] && echo /usr/share/zsh/vendor-completions/_raftlock \
            || echo /usr/share/fish/vendor_completions.d/raftlock.fish)
        "$shell" -n "$file" || fail "$file does not parse in $shell"
    fi
done

# Free loopback ports for the member (the kernel picks them).
read -r api_port raft_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
sed -i -e "s/127.0.0.1:7001/127.0.0.1:$api_port/" -e "s/127.0.0.1:7101/127.0.0.1:$raft_port/" \
    /etc/raftlock/cluster.toml
echo "# edited by the operator" >> /etc/raftlock/cluster.toml
cp /etc/raftlock/cluster.toml "$scratch/edited.toml"
endpoint="http://127.0.0.1:$api_port"

# One member from the installed config, as the unit runs it: the raftlock
# user, its id from raftlock.env.
serve() {
    # shellcheck disable=SC1091
    id="$(. /etc/raftlock/raftlock.env && echo "$RAFTLOCK_ID")"
    # setpriv execs the member itself (runuser would stay in between and
    # turn its SIGTERM into a failure).
    setpriv --reuid raftlock --regid raftlock --init-groups -- /usr/bin/raftlock serve --config /etc/raftlock/cluster.toml --id "$id" \
        >"$scratch/member.log" 2>&1 &
    member=$!
    local deadline=$((SECONDS + 60))
    until curl -fsS "$endpoint/v1/health" >/dev/null 2>&1; do
        kill -0 "$member" 2>/dev/null || { cat "$scratch/member.log" >&2; fail "the member exited"; }
        [ $SECONDS -lt $deadline ] || { cat "$scratch/member.log" >&2; fail "the member never became healthy"; }
        sleep 0.2
    done
}
stop_member() {
    kill -TERM "$member"
    wait "$member" || fail "the member did not stop cleanly on SIGTERM: $(tail -5 "$scratch/member.log")"
    member=""
}

echo "== one member from /etc/raftlock/cluster.toml, as the raftlock user"
serve
/usr/bin/raftlock lock --endpoints "$endpoint" package-check -- sh -c 'echo "under the lock, fencing token $RAFTLOCK_FENCING_TOKEN"'
/usr/bin/raftlock status --endpoints "$endpoint"
stop_member
[ -d /var/lib/raftlock/node-1 ] || fail "the member wrote no data to /var/lib/raftlock/node-1"
[ -z "$(find /var/lib/raftlock -mindepth 1 -not -user raftlock -not -name .created-by-package)" ] || fail "files in /var/lib/raftlock not owned by raftlock"

echo "== upgrade: dpkg -i $(basename "$deb_next")"
dpkg -i "$deb_next"
[ "$(dpkg-query -W -f='${Version}' raftlock)" = "$version+check1" ] || fail "not upgraded"
cmp -s /etc/raftlock/cluster.toml "$scratch/edited.toml" || fail "the upgrade replaced the edited conffile"
[ "$(getent passwd raftlock | cut -d: -f3)" = "$uid" ] || fail "the upgrade changed the raftlock user"
# The member starts again on the data it kept.
serve
/usr/bin/raftlock lock --endpoints "$endpoint" package-check -- true
stop_member
echo "upgraded to $version+check1; the edited config and the data are kept"

echo "== dpkg -r raftlock"
dpkg -r raftlock
[ ! -e /usr/bin/raftlock ] || fail "remove left /usr/bin/raftlock"
cmp -s /etc/raftlock/cluster.toml "$scratch/edited.toml" || fail "remove deleted the config"
getent passwd raftlock >/dev/null || fail "remove deleted the user"
[ -d /var/lib/raftlock/node-1 ] || fail "remove deleted the data"

echo "== dpkg -P raftlock"
dpkg -P raftlock
dpkg-query -W raftlock >/dev/null 2>&1 && fail "dpkg still knows raftlock after purge"
[ ! -e /etc/raftlock ] || fail "purge left /etc/raftlock: $(ls -A /etc/raftlock)"
[ ! -e /var/lib/raftlock ] || fail "purge left /var/lib/raftlock"
getent passwd raftlock >/dev/null && fail "purge left the raftlock user"
getent group raftlock >/dev/null && fail "purge left the raftlock group"
listing > "$scratch/after"
diff "$scratch/before" "$scratch/after" || fail "the file listing differs after purge (above: < gone, > left)"
echo "package check passed in $((SECONDS - started)) s"
