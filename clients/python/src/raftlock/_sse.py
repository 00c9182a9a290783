"""Reading an election's ``observe`` stream (Server-Sent Events), free of IO.

Each connect starts with the current state, so a reconnect misses nothing
that matters: the stream is one of leader *states*, and :class:`LeaderFeed`
drops repeats (every reconnect resends the state last seen).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, List, Optional

from . import _wire
from .types import Leader


@dataclass(frozen=True)
class Event:
    """One dispatched event."""

    name: str
    data: str


class Parser:
    """Incremental SSE parser: the subset of the WHATWG rules the server
    produces (``event``, ``data``, comments, ``\\n`` or ``\\r\\n`` lines)."""

    def __init__(self) -> None:
        self._buffer = b""
        self._name: Optional[str] = None
        self._data: Optional[List[str]] = None

    def push(self, chunk: bytes) -> Iterator[Event]:
        """Adds bytes; yields every event they complete."""
        self._buffer += chunk
        while b"\n" in self._buffer:
            raw, self._buffer = self._buffer.split(b"\n", 1)
            line = raw.decode("utf-8", "replace").rstrip("\r")
            if not line:
                if self._data is not None:
                    yield Event(self._name or "message", "\n".join(self._data))
                self._name, self._data = None, None
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                self._name = value
            elif field == "data":
                self._data = (self._data or []) + [value]
            # Comments (keep-alives), id and retry: nothing to do.


class LeaderFeed:
    """Turns raw stream bytes into changes of leader, across reconnects."""

    def __init__(self) -> None:
        self._parser = Parser()
        self._seen = False
        self._last: Optional[Leader] = None
        self.events = 0
        """Leader events read, repeats included: a reconnect that delivers
        one has worked, even if nothing changed."""
        self.done = False
        """Always False: an election is observed until the caller stops
        (a :class:`raftlock._stream.Feed`)."""

    def reconnected(self) -> None:
        """A new connection starts: drop any half-read event."""
        self._parser = Parser()

    def push(self, chunk: bytes) -> Iterator[Optional[Leader]]:
        """Yields each new leader state (``None``: no leader) in ``chunk``."""
        for event in self._parser.push(chunk):
            if event.name != "leader":
                continue
            self.events += 1
            leader = _wire.leader(event.data.encode())
            if self._seen and leader == self._last:
                continue
            self._seen, self._last = True, leader
            yield leader
