#!/usr/bin/env bash
# CI for the Python client (clients/python): the blocking modules must be
# what gen_sync.py generates from the asyncio ones, and src/raftlock/_codes.py
# what raftlock-api's raftlock-codes generates; then a fresh virtualenv
# in a temp dir, this package plus pytest and mypy from PyPI, `mypy
# --strict`, then the tests against real clusters. Needs only python3
# (>= 3.9) with pip and PyPI; the raftlock binary is $RAFTLOCK_BIN, else
# target/debug/raftlock (built here with cargo if it is missing). Extra
# arguments go to pytest, e.g. `clients/python/ci.sh -m "not keep_queued"`
# against an older server.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/raftlock-python-ci.XXXXXX")"
trap 'rm -rf "$work"' EXIT
venv="$work/venv"

echo "== python client: blocking modules generated from the asyncio ones"
python3 "$here/gen_sync.py" --check

echo "== python client: error-code table generated from raftlock-api's ErrorCode"
(cd "$repo" && cargo run --quiet --locked -p raftlock-api --bin raftlock-codes -- --check)

echo "== python client: virtualenv ($(python3 --version))"
if ! python3 -m venv "$venv" 2>"$work/venv.err"; then
    # Debian's python3 without python3-venv has no ensurepip: use
    # virtualenv (from PyPI, it brings its own pip) instead.
    cat "$work/venv.err" >&2
    echo "python3 -m venv failed; falling back to virtualenv" >&2
    rm -rf "$venv"
    python3 -m pip install --quiet --target "$work/virtualenv" virtualenv
    PYTHONPATH="$work/virtualenv" python3 -m virtualenv --quiet "$venv"
fi
python="$venv/bin/python"
# Installed from a copy: a build in place would leave build/ and
# *.egg-info in the source tree.
mkdir "$work/package"
cp -R "$here/pyproject.toml" "$here/README.md" "$here/src" "$work/package/"
"$python" -m pip install --quiet --disable-pip-version-check "$work/package" pytest mypy

if [ -z "${RAFTLOCK_BIN:-}" ]; then
    RAFTLOCK_BIN="$repo/target/debug/raftlock"
    if [ ! -x "$RAFTLOCK_BIN" ]; then
        echo "== python client: building $RAFTLOCK_BIN"
        (cd "$repo" && cargo build --locked -p raftlock-cli --bin raftlock)
    fi
fi
export RAFTLOCK_BIN
echo "== python client: server $RAFTLOCK_BIN"

echo "== python client: mypy --strict"
(cd "$here" && "$python" -m mypy --strict --cache-dir "$work/mypy-cache" src)

echo "== python client: pytest"
cd "$here"
PYTHONDONTWRITEBYTECODE=1 "$python" -m pytest -p no:cacheprovider -ra tests "$@"
