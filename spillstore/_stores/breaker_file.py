"""An outage one process found, told to the others on the machine: a small private file.

The breaker (:mod:`spillstore._stores.breaker`) is per process, and a one-shot command
(``spillstore ls --store s3://...``, ``read``, every ``spillstore run``) starts with a
closed one: each would pay the first probe's timeout again on an endpoint another
process just found down. So a breaker that opens writes the outage to a file under the
user's cache directory (``<cache>/outages/<key>.json``, the key a hash of the endpoint
and the bucket), and a closed breaker adopts an outage it finds there.

The file is a hint, never an authority: it is written atomically (a fresh 0600 file in
the same 0700 directory, then ``os.replace``), read only when its size and mtime
changed, and its outage is adopted only while it runs (``now < retry_at``) and only when
it claims no more than one pause (``retry_at - now <= pause_seconds <= max_pause``), so
a file from a skewed clock or a hand edit costs nothing. A probe that finds the endpoint
back removes the file. Every failure to read or write it is ignored (logged at debug):
without it each process finds the outage on its own, as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
import stat
from typing import Final

import platformdirs

from spillstore._stores.breaker import Outage
from spillstore._stores.local_files import write_all

__all__ = ["MAX_OUTAGE_FILE_BYTES", "SharedOutage", "outage_path", "shared_outage"]

logger = logging.getLogger("spillstore")

MAX_OUTAGE_FILE_BYTES: Final = 4096
"""A larger file is not one of ours: it is ignored."""


def outage_path(cache_dir: str, endpoint: str, bucket: str) -> str:
    """The outage file of ``bucket`` on ``endpoint`` under ``cache_dir``."""
    key = hashlib.sha256(f"{endpoint}\n{bucket}".encode()).hexdigest()[:32]
    return os.path.join(cache_dir, "outages", f"{key}.json")


def shared_outage(endpoint: str | None, region: str | None, bucket: str) -> SharedOutage:
    """The outage file of ``bucket`` at ``endpoint`` (None: AWS, in ``region``) under the
    user's cache directory (platformdirs' ``user_cache_dir("spillstore")``)."""
    where = endpoint or f"aws:{region or os.environ.get('AWS_REGION') or ''}"
    cache_dir = platformdirs.user_cache_dir("spillstore")
    return SharedOutage(outage_path(cache_dir, where, bucket), where)


def _adopted(data: object, now: float, max_pause: float) -> Outage | None:
    """The outage a file's ``data`` tells, if it is one to trust ``now`` (pure)."""
    if not isinstance(data, dict):
        return None
    reason, retry_at, pause = data.get("reason"), data.get("retry_at"), data.get("pause_seconds")
    if not (
        isinstance(reason, str)
        and isinstance(retry_at, int | float)
        and isinstance(pause, int | float)
        and 0 < pause <= max_pause
        and now < retry_at <= now + pause
    ):
        return None
    return Outage(reason=reason[:500], retry_at=float(retry_at), pause_seconds=float(pause))


class SharedOutage:
    """The outage file of one endpoint and bucket (see the module).

    Args:
        path: the file (:func:`outage_path`); its directory is made 0700 on first write.
        endpoint: what the file says it is about (for a person reading it).
    """

    def __init__(self, path: str, endpoint: str) -> None:
        self.path = path
        self._endpoint = endpoint
        self._seen: tuple[int, int] | None = None
        self._data: object = None

    def load(self, now: float, max_pause: float) -> Outage | None:
        """The outage another process recorded, if it runs ``now``; None otherwise."""
        try:
            st = os.stat(self.path)
        except OSError:
            self._seen = self._data = None
            return None
        seen = (st.st_mtime_ns, st.st_size)
        if seen != self._seen:
            self._seen, self._data = seen, None
            if stat.S_ISREG(st.st_mode) and 0 < st.st_size <= MAX_OUTAGE_FILE_BYTES:
                try:
                    with open(self.path, "rb") as f:
                        self._data = json.loads(f.read(MAX_OUTAGE_FILE_BYTES))
                except (OSError, ValueError) as exc:
                    logger.debug("ignoring the outage file %s: %s", self.path, exc)
        return _adopted(self._data, now, max_pause)

    def save(self, state: Outage) -> None:
        """Record an open breaker's outage (atomically; failures are ignored)."""
        if state.retry_at is None:
            return
        body = json.dumps(
            {
                "endpoint": self._endpoint,
                "reason": state.reason[:500],
                "retry_at": state.retry_at,
                "pause_seconds": state.pause_seconds,
            }
        ).encode()
        directory = os.path.dirname(self.path)
        temp = os.path.join(directory, f".tmp-{secrets.token_hex(8)}")
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            fd = os.open(temp, flags, 0o600)
            try:
                write_all(fd, body)
            finally:
                os.close(fd)
            os.replace(temp, self.path)
        except OSError as exc:
            logger.debug("could not record the outage in %s: %s", self.path, exc)
            with contextlib.suppress(OSError):
                os.unlink(temp)

    def clear(self) -> None:
        """Forget the outage (the endpoint answered); failures are ignored."""
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        self._seen = self._data = None
