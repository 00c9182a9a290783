"""The blocking modules are generated from the asyncio ones (gen_sync.py):
the checked-in files are what it generates, and its markers do what its
docstring says."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # gen_sync.py

import gen_sync  # noqa: E402


@pytest.mark.parametrize("source,target", gen_sync.targets(), ids=lambda p: p.name)
def test_checked_in_blocking_module_is_generated(source: Path, target: Path) -> None:
    want = gen_sync.generate(source.stem, source.read_text(encoding="utf-8"))
    assert target.read_text(encoding="utf-8") == want, (
        f"{target} differs from its generation: edit {source} and run gen_sync.py"
    )


def test_check_mode_passes_on_the_tree() -> None:
    assert gen_sync.main(["--check"]) == 0


SOURCE = '''"""Asyncio flavour."""
#> """Blocking flavour."""

import asyncio  # [async]
#> import threading
from .. import _api


class AsyncThing:
    """Shared docstring, AsyncSession named."""

    async def run(self, lock: asyncio.Lock) -> None:
        """The asyncio docstring."""
        #> """The blocking docstring,
        #> on two lines."""
        async with lock:
            await asyncio.sleep(1)  # [async]
            #> time.sleep(2)
        # <async>
        task = asyncio.ensure_future(self.run(lock))
        await task
        # </async>
        async for chunk in self.response.aiter_bytes():
            pass
        await self.response.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self
'''

BLOCKING = '''"""Blocking flavour."""

import threading
from . import _api


class AsyncThing:
    """Shared docstring, Session named."""

    def run(self, lock: threading.Lock) -> None:
        """The blocking docstring,
        on two lines."""
        with lock:
            time.sleep(2)
        for chunk in self.response.iter_bytes():
            pass
        self.response.close()

    def __enter__(self) -> Client:
        return self
'''


def test_markers_and_renames() -> None:
    assert gen_sync.generate("thing", SOURCE) == gen_sync.HEADER.format(name="thing") + BLOCKING


def test_names_are_replaced_as_whole_words_only() -> None:
    assert gen_sync.blocking("MyAsyncClient(AsyncClientX, AsyncClient)") == "MyAsyncClient(AsyncClientX, Client)"
    assert gen_sync.blocking("x.aclose_all(); y.aclose()") == "x.aclose_all(); y.close()"


@pytest.mark.parametrize(
    "source,where",
    [
        ("x = 1\n# <async>\ny = 2\n", "never closed"),
        ("x = 1\n# </async>\n", "without"),
        ("# <async>\n# <async>\n# </async>\n", "inside"),
    ],
)
def test_unbalanced_regions_are_refused(source: str, where: str) -> None:
    with pytest.raises(gen_sync.SourceError, match=where):
        gen_sync.generate("bad", source)
