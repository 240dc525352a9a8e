"""Reading many small spills of one session in one pass (session-wide Grep).

:meth:`LocalStore._scan_data <spillstore._stores.local.LocalStore._scan_data>` holds a
session directory open and reads each small data file whole with :func:`read_small`;
anything else (a big file, which is mapped, or any failure, which ``_open`` words as a
read would) goes through the store's ordinary ``_open``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Final

from spillstore._stores.local_catalog import Identity
from spillstore._stores.local_files import READ_FLAGS
from spillstore._stores.meta import SpillMeta

__all__ = ["SMALL_DATA_BYTES", "read_small"]

SMALL_DATA_BYTES: Final = 256 * 1024
"""A scan over many spills reads a data file up to this size whole instead of mapping
it: for a 17 KB spill, one read costs about half an ``mmap`` and its unmapping."""


def read_small(
    dir_fd: int,
    meta: SpillMeta,
    identity: Identity,
    check: Callable[[os.stat_result, SpillMeta, Identity], None],
) -> bytes | None:
    """A spill's data file up to :data:`SMALL_DATA_BYTES`, read whole from its session
    directory held open, after ``check`` accepted it; None for a bigger file and on any
    failure (the caller then opens it the ordinary way, which says why)."""
    size = meta.stored_bytes
    if size > SMALL_DATA_BYTES:
        return None
    try:
        fd = os.open(f"{meta.spill_id}.out", READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        check(os.fstat(fd), meta, identity)
        data = os.pread(fd, size, 0)
    except OSError:  # StoreError too: check refused it
        return None
    finally:
        os.close(fd)
    return data if len(data) == size else None
