"""One of the processes of the mutual-exclusion test.

Usage: contender.py ENDPOINTS LOCK ROUNDS DIR

Prints "ready" once its session is open, waits for "go" on stdin (so the
contenders start together), then takes LOCK ROUNDS times. Inside the
critical section it creates DIR/held exclusively (a second holder would
find it and fail) and appends its fencing token to DIR/tokens.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import raftlock


def main() -> int:
    endpoints, lock, rounds, directory = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    with raftlock.Client(endpoints, timeout=5) as client:
        with client.session(ttl=10) as session:
            print("ready", flush=True)
            if sys.stdin.readline().strip() != "go":
                return 2
            for _ in range(rounds):
                with session.lock(lock, timeout=30) as guard:
                    marker = os.open(directory / "held", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                    with open(directory / "tokens", "a") as tokens:
                        tokens.write(f"{guard.fencing_token} {os.getpid()}\n")
                    if not client.fencing_check(lock, guard.fencing_token).valid:
                        return 3
                    os.close(marker)
                    os.unlink(directory / "held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
