"""Reading a node watch stream (Server-Sent Events), free of IO.

The server sends each change after the requested revision once, in
revision order; several changes of one command share a revision. A
reconnect resumes after the revision *before* the last one delivered (the
rest of that revision's changes may not have arrived) and
:class:`WatchFeed` drops what it already delivered, so a dropped
connection loses and repeats nothing (docs/api.md, Nodes).
"""

from __future__ import annotations

from typing import Iterator, Set

from . import _wire
from ._sse import Parser
from .types import WatchEvent

_KINDS = ("put", "delete", "compacted")


class WatchFeed:
    """Turns raw stream bytes into new changes, across reconnects."""

    def __init__(self, since_revision: int) -> None:
        self._parser = Parser()
        self.revision = since_revision
        """The newest revision delivered (at first, the one asked for)."""
        self._at_revision: Set[str] = set()
        self.events = 0
        """Events read, repeats included: a reconnect that delivers one has worked."""
        self.done = False
        """True after ``compacted``: the watch is over."""

    def reconnected(self) -> None:
        """A new connection starts: drop any half-read event."""
        self._parser = Parser()

    def since(self) -> int:
        """The ``since_revision`` to reconnect with."""
        if self._at_revision and self.revision > 0:
            return self.revision - 1
        return self.revision

    def push(self, chunk: bytes) -> Iterator[WatchEvent]:
        """Yields each change in ``chunk`` not yet delivered, and a final
        ``compacted``."""
        for raw in self._parser.push(chunk):
            if self.done or raw.name not in _KINDS:
                continue
            self.events += 1
            event = _wire.watch_event(raw.name, raw.data)
            if event.kind == "compacted":
                self.done = True
                yield event
                continue
            if event.revision < self.revision or (
                event.revision == self.revision and event.path in self._at_revision
            ):
                continue
            if event.revision > self.revision:
                self.revision = event.revision
                self._at_revision = set()
            self._at_revision.add(event.path)
            yield event
