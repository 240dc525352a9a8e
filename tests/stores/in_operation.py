"""A thread that stays inside one catalog operation, for the tests of ``check --fix``
with other threads of the process using the catalog."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import spillstore._stores.local_db as local_db
from spillstore._stores.local import LocalStore
from spillstore._stores.meta import SpillMeta

__all__ = ["thread_in_an_operation"]


@contextlib.contextmanager
def thread_in_an_operation(store: LocalStore, session: str) -> Iterator[list[SpillMeta]]:
    """Start a thread that lists ``session`` inside a catalog operation and stays in it
    until the block ends; yield what it listed."""
    inside, leave = threading.Event(), threading.Event()
    listed: list[SpillMeta] = []

    def hold_an_operation() -> None:
        with local_db.db_errors("a long operation"):
            listed.extend(store._catalog.list(session))
            inside.set()
            leave.wait(60)

    holder = threading.Thread(target=hold_an_operation)
    holder.start()
    try:
        assert inside.wait(60)
        yield listed
    finally:
        leave.set()
        holder.join(60)
