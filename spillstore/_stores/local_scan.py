"""Reading many small spills of one session in one pass (session-wide Grep), and the
check every read of a data file passes (:func:`check_data`).

:meth:`LocalStore._scan_data <spillstore._stores.local.LocalStore._scan_data>` holds a
session directory open and reads each small data file whole with :func:`read_small`;
anything else (a big file, which is mapped, or any failure, which ``_open`` words as a
read would) goes through the store's ordinary ``_open``.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Final

from spillstore._errors import StoreError
from spillstore._stores.local_catalog import Identity
from spillstore._stores.local_files import READ_FLAGS
from spillstore._stores.meta import SpillMeta

__all__ = ["SMALL_DATA_BYTES", "check_data", "read_small"]

SMALL_DATA_BYTES: Final = 256 * 1024
"""A scan over many spills reads a data file up to this size whole instead of mapping
it: for a 17 KB spill, one read costs about half an ``mmap`` and its unmapping."""


def read_small(dir_fd: int, meta: SpillMeta, identity: Identity) -> bytes | None:
    """A spill's data file up to :data:`SMALL_DATA_BYTES`, read whole from its session
    directory held open, after :func:`check_data` accepted it; None for a bigger file and on any
    failure (the caller then opens it the ordinary way, which says why)."""
    size = meta.stored_bytes
    if size > SMALL_DATA_BYTES:
        return None
    try:
        fd = os.open(f"{meta.spill_id}.out", READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        check_data(os.fstat(fd), meta, identity)
        data = os.pread(fd, size, 0)
    except OSError:  # StoreError too: check_data refused it
        return None
    finally:
        os.close(fd)
    return data if len(data) == size else None


def check_data(st: os.stat_result, meta: SpillMeta, identity: Identity) -> None:
    """Refuse a data file that is not the one the row recorded."""
    where = f"the data file of spill {meta.spill_id}"
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(errno.EINVAL, f"{where} is not a regular file")
    if (st.st_dev, st.st_ino) != identity:
        raise StoreError(
            errno.EPERM,
            f"{where} is not the file the store wrote (it was replaced, perhaps by a link "
            "to a file that is not spillstore's); refusing it",
        )
    if meta.adopted_inode is not None and (
        (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != meta.adopted_inode
    ):
        raise StoreError(
            errno.ESTALE,
            f"{where} was adopted from a tool's file that has changed since; "
            "refusing to serve different content",
        )
    if st.st_size != meta.stored_bytes:
        raise StoreError(
            errno.EIO, f"{where} holds {st.st_size} bytes, its record says {meta.stored_bytes}"
        )
