#!/usr/bin/env python3
"""Generates the blocking client's modules from the asyncio ones.

The asyncio modules (``src/raftlock/aio/{client,session,lock,shared,
election,reentrant}.py``) are the one implementation; this script writes
``src/raftlock/{same names}.py`` from them, and ``--check`` (run by
``ci.sh``) fails when a generated file differs from what it would write,
so the two flavours cannot drift. Edit the asyncio source, then run::

    python3 clients/python/gen_sync.py

Each line of an asyncio source becomes, in the blocking module:

- with the asyncio spelling replaced by the blocking one (``async def``,
  ``async with``, ``async for`` lose their ``async``, ``await`` goes,
  and the names of :data:`RENAMES` are replaced, in code, strings and
  comments alike), unless it is one of the following;
- nothing, between a line ``# <async>`` and a line ``# </async>`` (the
  asyncio-only code; those two lines go too), or if it ends with
  ``# [async]``;
- ``code``, for a line ``#> code`` (blocking-only code, written in the
  blocking spelling, taken as it is; indentation is kept);
- and a run of ``#>`` lines right after a docstring replaces that
  docstring (the blocking flavour's own).

Needs only the standard library (Python >= 3.9).
"""

from __future__ import annotations

import ast
import difflib
import re
import sys
from pathlib import Path
from typing import Dict, List, Set, Tuple

HERE = Path(__file__).resolve().parent
PACKAGE = HERE / "src" / "raftlock"
MODULES = ["client", "session", "lock", "shared", "election", "reentrant"]

RENAMES = {
    "AsyncClient": "Client",
    "AsyncSession": "Session",
    "AsyncLockGuard": "LockGuard",
    "AsyncRwLockGuard": "RwLockGuard",
    "AsyncSemaphorePermit": "SemaphorePermit",
    "AsyncMultiLockGuard": "MultiLockGuard",
    "AsyncElection": "Election",
    "AsyncReentrantLock": "ReentrantLock",
    "AsyncReentrantHold": "ReentrantHold",
    "AsyncIterator": "Iterator",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "aclose": "close",
    "aread": "read",
    "aiter_bytes": "iter_bytes",
    "asyncio.Lock": "threading.Lock",
    "asyncio.Event": "threading.Event",
    "asyncio.sleep": "time.sleep",
    "httpx.AsyncClient": "httpx.Client",
}
"""Asyncio names and their blocking counterparts, as whole words."""

_SYNTAX = [
    (re.compile(r"\basync (def|with|for)\b"), r"\1"),
    (re.compile(r"\bawait "), ""),
    (re.compile(r"\bfrom \.\.(?!\.)"), "from ."),
]
_NAMES = re.compile(
    r"(?<!\w)(" + "|".join(re.escape(k) for k in sorted(RENAMES, key=len, reverse=True)) + r")(?!\w)"
)
_SYNC = re.compile(r"^(\s*)#>(?: (.*))?$")
_ASYNC_LINE = re.compile(r"\s*# \[async\]$")

HEADER = (
    "# Generated from raftlock/aio/{name}.py by clients/python/gen_sync.py:\n"
    "# do not edit; edit the asyncio module and run the script again.\n"
)


class SourceError(Exception):
    """A marker out of place in an asyncio source."""


def blocking(line: str) -> str:
    """One line of asyncio code in the blocking spelling."""
    for pattern, replacement in _SYNTAX:
        line = pattern.sub(replacement, line)
    return _NAMES.sub(lambda m: RENAMES[m.group(1)], line)


def _docstrings(source: str) -> Dict[int, int]:
    """The docstrings of ``source``: first line -> last line (1-based)."""
    found: Dict[int, int] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
                and first.end_lineno is not None
            ):
                found[first.lineno] = first.end_lineno
    return found


def generate(name: str, source: str) -> str:
    """The blocking module generated from asyncio module ``name``'s ``source``."""
    lines = source.splitlines()
    docstrings = _docstrings(source)
    replaced: Set[int] = set()  # 0-based lines of docstrings with a blocking one
    for first, last in docstrings.items():
        if last < len(lines) and _SYNC.match(lines[last]):
            replaced.update(range(first - 1, last))
    out: List[str] = []
    in_async = 0  # line number of the open ``# <async>``, or 0
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped == "# <async>":
            if in_async:
                raise SourceError(f"{name}.py:{number}: # <async> inside the one of line {in_async}")
            in_async = number
            continue
        if stripped == "# </async>":
            if not in_async:
                raise SourceError(f"{name}.py:{number}: # </async> without # <async>")
            in_async = 0
            continue
        if in_async or number - 1 in replaced or _ASYNC_LINE.search(line):
            continue
        sync = _SYNC.match(line)
        if sync:
            out.append((sync.group(1) + (sync.group(2) or "")).rstrip())
        else:
            out.append(blocking(line))
    if in_async:
        raise SourceError(f"{name}.py:{in_async}: # <async> never closed")
    return HEADER.format(name=name) + "\n".join(out) + "\n"


def targets() -> List[Tuple[Path, Path]]:
    """(asyncio source, generated blocking module) of every module."""
    return [(PACKAGE / "aio" / f"{name}.py", PACKAGE / f"{name}.py") for name in MODULES]


def main(argv: List[str]) -> int:
    check = argv == ["--check"]
    if argv and not check:
        print(f"usage: {Path(__file__).name} [--check]", file=sys.stderr)
        return 2
    stale = []
    for source, target in targets():
        try:
            want = generate(source.stem, source.read_text(encoding="utf-8"))
        except SourceError as e:
            print(f"{source}: {e}", file=sys.stderr)
            return 1
        have = target.read_text(encoding="utf-8") if target.exists() else ""
        if have == want:
            continue
        stale.append(target)
        if check:
            rel = target.relative_to(HERE)
            diff = difflib.unified_diff(
                have.splitlines(keepends=True),
                want.splitlines(keepends=True),
                f"{rel} (checked in)",
                f"{rel} (generated)",
            )
            sys.stdout.writelines(diff)
        else:
            target.write_text(want, encoding="utf-8")
            print(f"wrote {target.relative_to(HERE)}")
    if check and stale:
        names = ", ".join(str(t.relative_to(HERE)) for t in stale)
        print(
            f"\n{names}: not what gen_sync.py generates from the asyncio modules; edit those "
            "(src/raftlock/aio/) and run `python3 clients/python/gen_sync.py`",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
