"""A store that could not be opened, standing in so that tool calls still work.

A long-running host (the MCP proxy, ``spillstore run``) that cannot open its store at
start (a full disk, an unreadable catalog, EIO) must not fail its tool calls for it
(design.md: a full disk or a dead backend never fails a tool call).
:class:`UnavailableStore` takes the store's place: every operation fails with the
error the store gave, so an oversized result gets the "NOT saved" preview and the
spill tools say why nothing can be read.
"""

from __future__ import annotations

import builtins
import errno
import logging
from collections.abc import Callable
from typing import NoReturn

from spillstore._errors import StoreError, UnsafeStoreRoot
from spillstore._stores.backend import DataReader
from spillstore._stores.base import Store
from spillstore._stores.meta import SpillMeta
from spillstore._stores.writer import Sink

__all__ = ["UnavailableStore", "unavailable_on_failure"]


class UnavailableStore(Store):
    """Every operation raises :class:`StoreError` with the reason the store could not be
    opened.

    Args:
        error: what opening the store raised.
    """

    def __init__(self, error: StoreError) -> None:
        super().__init__()
        self.errno_code = error.errno if error.errno is not None else errno.EIO
        self.reason = str(error.strerror or error)

    def _fail(self) -> NoReturn:
        raise StoreError(self.errno_code, f"the store could not be opened: {self.reason}")

    def _create(self, session: str) -> Sink:
        self._fail()

    def _stat(self, spill_id: str) -> SpillMeta:
        self._fail()

    def _list(self, session: str | None) -> builtins.list[SpillMeta]:
        self._fail()

    def _open(self, meta: SpillMeta) -> DataReader:
        self._fail()

    def _read_index(self, meta: SpillMeta) -> bytes:
        self._fail()

    def _remove(self, meta: SpillMeta, *, reason: str, now: float) -> bool:
        self._fail()


def unavailable_on_failure(open_store: Callable[[], Store], log: logging.Logger) -> Store:
    """``open_store()``, or an :class:`UnavailableStore` (with a warning) when it fails
    with a :class:`StoreError`; a refused root (:class:`UnsafeStoreRoot`) and a bad
    setting still raise, as a mistake to fix rather than a failure to ride out."""
    try:
        return open_store()
    except UnsafeStoreRoot:
        raise
    except StoreError as exc:
        log.warning("the store cannot be used (%s); outputs will not be saved", exc)
        return UnavailableStore(exc)
