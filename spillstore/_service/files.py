"""Reading a file a tool handed over (``full_output_path``) without the store.

Two bounded reads: the whole text of a small file, or the ends and the measure of a
large one when the store could not adopt it. Neither follows a FIFO or a device.
"""

from __future__ import annotations

import os
import stat

from spillstore._core.utf8 import utf8_size
from spillstore._errors import StoreError
from spillstore._service.flow import Measure
from spillstore._stores.tally import Tally

__all__ = ["read_ends", "read_if_small"]

_READ_CHUNK = 1024**2
"""Bytes read at a time when a file is previewed without the store."""


def read_if_small(path: str, budget: int, others_size: int = 0) -> str | None:
    """The file's text when it fits ``budget`` bytes, else ``None`` (it must be adopted)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StoreError(f"{path} is not a regular file")
        if info.st_size > budget:
            return None
        data = os.read(fd, min(budget, info.st_size) + 1)  # never a buffer past the file
    finally:
        os.close(fd)
    if len(data) > budget:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:  # invalid bytes that outgrow the budget once decoded are
        text = data.decode("utf-8", "replace")  # adopted raw, never saved decoded
    return text if utf8_size(text) + others_size <= budget else None


def read_ends(path: str, head_bytes: int, tail_bytes: int) -> tuple[bytes, bytes, Measure]:
    """A file's first and last bytes, its sha256, size and newlines, in one bounded pass.

    Raises:
        StoreError: the path is not a regular file (a device such as ``/dev/zero`` would
            be read forever, a FIFO without a writer would block).
    """
    tally = Tally()
    first = bytearray()
    last = bytearray()
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StoreError(f"{path} is not a regular file")
        while chunk := file.read(_READ_CHUNK):
            tally.feed(chunk)
            if len(first) < head_bytes:
                first += chunk[: head_bytes - len(first)]
            last += chunk[-tail_bytes:]
            del last[:-tail_bytes]
    measured = Measure(tally.sha256, tally.total_bytes, tally.newlines, tally.invalid_utf8)
    return bytes(first), bytes(last), measured
