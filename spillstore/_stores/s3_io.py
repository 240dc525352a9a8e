"""Reading and writing one S3 spill's data: ranged GETs and a multipart upload.

A read is a ranged GET, and a reader lives for one operation, keeping what it fetched
so a line page costs two GETs, not three. Grep's whole-data buffer is downloaded once,
into memory up to :data:`SPOOL_MIN_BYTES` and otherwise streamed into an anonymous
temporary file that is ``mmap``-ed, so memory stays bounded for any size.

A write streams the stored bytes into a multipart upload under a fresh random token
(the id is content-derived, so it is known only at the end), then writes the index,
the session pointer, and the sidecar LAST with ``If-None-Match: *``: the sidecar is the
commit point (see :mod:`spillstore.s3`).
"""

from __future__ import annotations

import errno
import logging
import secrets
import tempfile
from typing import IO, TYPE_CHECKING, Final

import obstore
from obstore.exceptions import AlreadyExistsError

from spillstore._errors import SpillstoreError, StoreError
from spillstore._stores.backend import MappedReader
from spillstore._stores.meta import SpillMeta
from spillstore._stores.s3_bucket import Bucket, Sidecar, describe, put_new
from spillstore._stores.writer import Sink

if TYPE_CHECKING:
    from obstore import WritableFile

__all__ = [
    "DOWNLOAD_CHUNK_BYTES",
    "READ_WINDOW_BYTES",
    "SPOOL_MIN_BYTES",
    "S3Reader",
    "S3Sink",
]

logger = logging.getLogger("spillstore")

SPOOL_MIN_BYTES: Final = 8 << 20
"""Grep downloads a spill at most this large into memory; larger ones are streamed into
an anonymous temporary file and ``mmap``-ed (bounded memory)."""

READ_WINDOW_BYTES: Final = 4 << 20
"""A reader keeps and extends at most this many bytes of what it fetched."""

DOWNLOAD_CHUNK_BYTES: Final = 1 << 20
"""Chunk size of a streamed download."""


class S3Reader(MappedReader):
    """Ranged GETs of one data object; ``buffer`` downloads it once (see the module).

    A reader lives for one operation. It keeps what it fetched (up to
    :data:`READ_WINDOW_BYTES` from its first GET), and a later read within that reach
    fetches only what is missing: a line page reads its first index block, then its last
    one, then the page between the two, so it costs two GETs instead of three.
    """

    def __init__(self, bucket: Bucket, meta: SpillMeta, key: str) -> None:
        self._bucket = bucket
        self._meta = meta
        self._key = key
        self._window_start = 0
        self._window = b""
        self._file: IO[bytes] | None = None

    def _get(self, start: int, end: int) -> bytes:
        with (
            self._bucket.missing_means_expired(self._meta),
            self._bucket.request("cannot read spill data"),
        ):
            data = bytes(obstore.get_range(self._bucket.objects, self._key, start=start, end=end))
        if len(data) != end - start:
            raise StoreError(
                errno.EIO, f"the data of spill {self._meta.spill_id} is shorter than recorded"
            )
        return data

    def read(self, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        low, high = self._window_start, self._window_start + len(self._window)
        if self._window and low <= start and end - low <= READ_WINDOW_BYTES:
            if end > high:  # fetch what is missing (and any gap), once
                self._window += self._get(high, end)
            return self._window[start - low : end - low]
        data = self._get(start, end)
        if len(data) <= READ_WINDOW_BYTES:
            self._window_start, self._window = start, data
        return data

    def buffer(self) -> bytes | memoryview:
        size = self._meta.stored_bytes
        with (
            self._bucket.missing_means_expired(self._meta),
            self._bucket.request("cannot read spill data"),
        ):
            result = obstore.get(self._bucket.objects, self._key)
            if result.meta["size"] != size:
                raise StoreError(
                    errno.EIO,
                    f"the data of spill {self._meta.spill_id} holds {result.meta['size']} "
                    f"bytes, its sidecar says {size}",
                )
            if size <= SPOOL_MIN_BYTES:
                return bytes(result.bytes())
            spool = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
            self._file = spool
            written = 0
            for chunk in result.stream(min_chunk_size=DOWNLOAD_CHUNK_BYTES):
                spool.write(chunk)
                written += len(chunk)
            spool.flush()
        if written != size:
            raise StoreError(
                errno.EIO, f"the data of spill {self._meta.spill_id} changed while downloading"
            )
        return self._map(spool.fileno())

    def close(self) -> None:
        super().close()
        if self._file is not None:
            self._file.close()
            self._file = None


class S3Sink(Sink):
    """Writes one spill: a multipart upload under a fresh token, index, then sidecar."""

    def __init__(
        self, bucket: Bucket, session: str, *, part_bytes: int, upload_concurrency: int
    ) -> None:
        self._bucket = bucket
        self._session = session
        self._part_bytes = part_bytes
        self._upload_concurrency = upload_concurrency
        self._token = secrets.token_hex(16)
        self._data_key = bucket.key(session, "data", f"{self._token}.out")
        self._index_key = bucket.key(session, "data", f"{self._token}.idx")
        self._writer: WritableFile | None = None
        self._written = 0
        self._started = False
        self._keep = False  # the outcome is unknown: leave the objects to gc

    def write(self, data: bytes | memoryview) -> None:
        if not data:
            return
        if isinstance(data, memoryview) and not isinstance(data.obj, bytes):
            data = bytes(data)  # obstore keeps a reference until the part is sent
        with self._bucket.request("cannot upload spill data", writing=True):
            if self._writer is None:
                self._started = True
                self._writer = obstore.open_writer(
                    self._bucket.objects,
                    self._data_key,
                    buffer_size=self._part_bytes,
                    max_concurrency=self._upload_concurrency,
                )
            self._writer.write(data)
        self._written += len(data)

    def publish(self, meta: SpillMeta, index: bytes) -> SpillMeta:
        bucket = self._bucket
        spill_id = meta.spill_id
        try:
            if self._written != meta.stored_bytes:
                raise StoreError(
                    errno.EIO,
                    f"spill {spill_id}: {self._written} bytes written, expected "
                    f"{meta.stored_bytes}",
                )
            with bucket.request(f"cannot store spill {spill_id}", writing=True):
                if self._writer is not None:
                    writer, self._writer = self._writer, None
                    writer.close()
                self._started = True
                put_new(bucket.objects, self._index_key, index)
                bucket.put_session_of(spill_id, self._session)
            stored = self._put_sidecar(meta)
        except BaseException:
            self.discard()
            raise
        bucket.forget_tombstone(self._session, spill_id)
        return stored

    def _put_sidecar(self, meta: SpillMeta) -> SpillMeta:
        bucket = self._bucket
        spill_id = meta.spill_id
        key = bucket.key(self._session, f"{spill_id}.json")
        body = Sidecar(data=self._token, meta=meta).model_dump_json().encode()
        try:
            with bucket.request(f"cannot store spill {spill_id}", writing=True):
                written = obstore.put(bucket.objects, key, body, mode="create")
        except AlreadyExistsError:
            existing = bucket.load(self._session, spill_id)
            if existing is None:
                raise StoreError(
                    errno.EAGAIN, f"spill {spill_id} was removed while it was being stored"
                ) from None
            existing_meta, token = existing
            if token == self._token:  # our own PUT, retried after its reply was lost
                return existing_meta
            if (existing_meta.sha256, existing_meta.stored_ranges) != (
                meta.sha256,
                meta.stored_ranges,
            ):
                raise StoreError(
                    errno.EEXIST, f"spill id {spill_id} is taken by other content"
                ) from None
            self.discard()  # an identical spill exists: drop our copy, return it
            return existing_meta
        except StoreError as failure:
            # A timeout or a lost reply: the sidecar may exist. Read it back before
            # deleting anything it could point at.
            try:
                existing = bucket.load(self._session, spill_id, forced=True)
            except (SpillstoreError, OSError):
                self._keep = True
                raise failure from failure.__cause__
            if existing is not None and existing[1] == self._token:
                return existing[0]
            raise
        bucket.remember(spill_id, self._session, meta, self._token, written["e_tag"])
        return meta

    def discard(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            try:
                with self._bucket.request("cannot abort the upload"):
                    writer.__exit__(StoreError, None, None)  # aborts the multipart upload
            except StoreError as exc:
                logger.debug("aborting the upload of %s failed: %s", self._data_key, exc)
        if not self._started or self._keep:
            return
        self._started = False
        try:  # fails fast when this failure showed the endpoint down: gc removes it then
            with self._bucket.request("cannot remove the data of a failed spill"):
                obstore.delete(self._bucket.objects, [self._data_key, self._index_key])
        except StoreError as exc:
            logger.warning(
                "could not remove %s of a failed spill (gc removes it later): %s",
                self._data_key,
                describe(exc),
            )
