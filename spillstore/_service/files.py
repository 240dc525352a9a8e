"""Reading a file a tool handed over (``full_output_path``) without the store.

Bounded reads: the whole text of a small file, the ends and the measure of a large one
when the store could not adopt it, and its ends and its lines shaped (append mode) when
the store did not keep it whole. None follows a FIFO or a device.
"""

from __future__ import annotations

import os
import stat

from spillstore._core.shape import LineShaper, Shaped
from spillstore._core.utf8 import utf8_size
from spillstore._errors import StoreError
from spillstore._service.flow import Measure
from spillstore._stores.tally import Tally

__all__ = [
    "FIRST_SHAPE_READ",
    "SHAPE_READ",
    "read_ends",
    "read_ends_of",
    "read_if_small",
    "shape_file",
]

_READ_CHUNK = 1024**2
"""Bytes read at a time when a file is previewed without the store."""

FIRST_SHAPE_READ = 64 * 1024
"""Bytes of an output read first to shape it: enough to prove that an output of short
lines cannot fit once shaped."""

SHAPE_READ = 1024**2
"""Bytes read at a time after that (an output of few, long lines is read whole)."""


def _open_regular(path: str) -> tuple[int, os.stat_result]:
    """``path`` opened for reading, and its status; never a FIFO (the open does not
    block) or a device, which could be read forever.

    Raises:
        StoreError: the path is not a regular file.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StoreError(f"{path} is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def read_if_small(path: str, budget: int, others_size: int = 0) -> str | None:
    """The file's text when it fits ``budget`` bytes, else ``None`` (it must be adopted)."""
    fd, info = _open_regular(path)
    try:
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
    fd, _ = _open_regular(path)
    with open(fd, "rb") as file:
        while chunk := file.read(_READ_CHUNK):
            tally.feed(chunk)
            if len(first) < head_bytes:
                first += chunk[: head_bytes - len(first)]
            last += chunk[-tail_bytes:]
            del last[:-tail_bytes]
    measured = Measure(tally.sha256, tally.total_bytes, tally.newlines, tally.invalid_utf8)
    return bytes(first), bytes(last), measured


def shape_file(path: str, shaper: LineShaper, total_bytes: int, room: int) -> Shaped | None:
    """The file's lines cut as :func:`~spillstore._core.shape.shape_lines` cuts a text,
    read through ``shaper`` (which stops reading once the shaped text is over its budget).

    For a file the store did not keep whole (the retention cap cut it, or the store
    failed): the file is still the whole output. None when the file is no longer
    ``total_bytes`` long (it changed since it was measured) or the shaped text does not
    fit ``room``.

    Raises:
        StoreError: the path is not a regular file.
    """
    fd, info = _open_regular(path)
    with open(fd, "rb") as file:
        if info.st_size != total_bytes:
            return None
        size = FIRST_SHAPE_READ
        while not shaper.over and (chunk := file.read(size)):
            shaper.feed(chunk)
            size = SHAPE_READ
    return shaper.finish(room)


def read_ends_of(
    path: str, total_bytes: int, head_bytes: int, tail_bytes: int
) -> tuple[bytes, bytes] | None:
    """The first ``head_bytes`` and last ``tail_bytes`` of a file measured at
    ``total_bytes`` (two reads, for the previews of an output the store kept in part, so
    they show what the whole text and a stream show); None when its size changed.

    Raises:
        StoreError: the path is not a regular file.
    """
    fd, info = _open_regular(path)
    try:
        if info.st_size != total_bytes:
            return None
        first = os.pread(fd, min(head_bytes, total_bytes), 0)
        start = max(0, total_bytes - tail_bytes)
        last = os.pread(fd, total_bytes - start, start)
    finally:
        os.close(fd)
    if len(first) != min(head_bytes, total_bytes) or len(last) != total_bytes - start:
        return None
    return first, last
