"""S3-compatible spill storage (AWS S3, MinIO, R2, ...) for fleets of agent workers.

Needs obstore: ``pip install "spillstore[s3]"``.

A spill written by worker B is readable by the model on worker A: :class:`S3Store` keeps
the same contract as :class:`~spillstore.LocalStore` (the same contract suite runs over
both), on a bucket. Credentials, region and endpoint come from the usual environment
variables (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
``AWS_REGION``, ``AWS_ENDPOINT_URL``, ...) through obstore, unless passed explicitly.

Layout under ``<bucket>/<prefix>/``::

    _ids/<spill_id>              the session of a spill (so a cold stat is 2 GETs, not a scan)
    _cleaner.lock                lease held by the one cleaner running (conditional writes)
    <session>/
      <spill_id>.json            sidecar: {"format": 1, "data": <token>, "meta": SpillMeta}
      <spill_id>.gone            tombstone of a removed spill (reason and time)
      data/<token>.out           the stored bytes (head, then retained tail)
      data/<token>.idx           the sparse line index

How a spill is written: the stored bytes stream into a *multipart upload* under a fresh
random token (the id is content-derived, so it is only known at the end): parts of
``part_bytes`` go up as they fill, at most ``upload_concurrency`` at a time, so memory
stays bounded whatever the size; small spills are one PUT. At commit the upload is
completed, then the index is written, then the ``_ids`` entry, then the sidecar LAST with
``If-None-Match: *`` (obstore's ``mode="create"``). The sidecar is the commit point: a
reader that finds none sees no spill, and a different spill is never written over an
existing id (ids are content-derived: an identical put finds the existing sidecar, drops
its own upload and returns the existing spill). A failure before the sidecar aborts the
multipart upload and deletes what was written; a failure whose outcome is unknown (a
timeout on the sidecar PUT) is settled by reading the sidecar back before anything is
deleted. Uploads that die with their process are unreferenced ``data/`` objects that
``gc`` removes after the grace period (and incomplete multipart uploads are invisible;
a bucket lifecycle rule should abort them after a day).

Reads are ranged GETs: every operation reads the sidecar (which also proves the spill
still exists), and a Read of line 5,000,000 then fetches the first index block and,
extending that GET, the rest of the page: never the object. Grep
(:meth:`~spillstore.Store.segments`) downloads the stored bytes once, into memory up to
:data:`SPOOL_MIN_BYTES` and otherwise streamed into an anonymous temporary file that is
``mmap``-ed, so memory stays bounded for any size (the Grep engine scans one buffer per
stored range). Listing uses the ``/`` delimiter, so session ``s1`` never lists ``s10``.
``gc`` and ``clean`` work by prefix; removal writes a tombstone, then deletes the sidecar
(the spill is gone from then on), then the data, so a read says "expired". One cleaner
runs at a time across the fleet: a lease object taken with ``If-None-Match`` and, once
lapsed, taken over with ``If-Match`` on its ETag. Spills have no file path
(``meta.path`` is None): refer to them by id.

The async twins are the shared ones (one worker-thread hop per operation; obstore's
sync calls release the GIL). obstore's native async API was measured against them (see
benchmarks/RESULTS.md): it opened one connection per task and was slower at 200
concurrent reads, and its futures are asyncio-only while the store's async API runs on
any anyio backend.

Every key is built by one function that refuses empty or ``.``/``..`` segments,
backslashes, NUL and other control characters, and keys over 1,024 UTF-8 bytes.
"""

from __future__ import annotations

try:
    import obstore
    from obstore.exceptions import (
        AlreadyExistsError,
        BaseError,
        PermissionDeniedError,
        PreconditionError,
        UnauthenticatedError,
    )
    from obstore.store import S3Store as _ObjectStore
except ImportError as exc:  # pragma: no cover - the test environment has obstore
    raise ImportError('spillstore.s3 needs obstore: pip install "spillstore[s3]"') from exc

import builtins
import contextlib
import errno
import json
import logging
import mmap
import re
import secrets
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import IO, TYPE_CHECKING, Any, Final, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from spillstore._core.gc_plan import GcEntry
from spillstore._errors import ConfigError, SpillNotFound, SpillstoreError, StoreError
from spillstore._stores.base import DataReader, Sink, Store, expired_error
from spillstore._stores.meta import (
    DEFAULT_RETAINED_TAIL_BYTES,
    DEFAULT_RETENTION_BYTES,
    SpillMeta,
    is_spill_id,
    validate_session,
)

if TYPE_CHECKING:
    from obstore import WritableFile
    from obstore.store import ClientConfig, RetryConfig, S3Config, S3CredentialProvider

__all__ = ["DEFAULT_PREFIX", "S3Store"]

logger = logging.getLogger("spillstore")

DEFAULT_PREFIX: Final = "spillstore"
"""The key prefix spills live under when none is given."""

PART_BYTES: Final = 8 << 20
"""Default multipart part size (S3 requires at least 5 MiB for all parts but the last)."""

UPLOAD_CONCURRENCY: Final = 2
"""Default number of parts uploaded at once; memory per writer is about
``(upload_concurrency + 1) * part_bytes``."""

SPOOL_MIN_BYTES: Final = 8 << 20
"""Grep downloads a spill at most this large into memory; larger ones are streamed into
an anonymous temporary file and ``mmap``-ed (bounded memory)."""

READ_WINDOW_BYTES: Final = 4 << 20
"""A reader keeps and extends at most this many bytes of what it fetched."""

DOWNLOAD_CHUNK_BYTES: Final = 1 << 20
"""Chunk size of a streamed download."""

TOMBSTONE_TTL_SECONDS: Final = 7 * 24 * 3600.0
"""How long a removed spill's id is remembered (``gc`` prunes older tombstones)."""

CLEANER_LEASE_SECONDS: Final = 600.0
"""A cleaner's lock lapses this long after it was taken (a crashed cleaner's lock is
then taken over); cleaners wait, polling, while another holds a live lease."""

MAX_KEY_BYTES: Final = 1024
"""S3's limit on a key, prefix included (UTF-8 bytes)."""

FETCH_CONCURRENCY: Final = 8
"""Sidecars fetched at once when listing."""

_MAX_SIDECAR_BYTES = 16 << 20
_MAX_INDEX_BYTES = 1 << 30
_CACHE_SIZE = 65536
_IDS = "_ids"
_LOCK = "_cleaner.lock"
_DATA_RE = re.compile(r"data/([0-9a-f]{32})\.(?:out|idx)")
_MIN_PART_BYTES = 5 << 20
_MAX_PART_BYTES = 5 << 30

_T = TypeVar("_T")
_R = TypeVar("_R")


# --------------------------------------------------------------------------- keys


def check_key(key: str, *, what: str = "key") -> str:
    """Return ``key`` if it is a safe object key (relative to the store's prefix).

    Raises:
        ConfigError: an empty, ``.`` or ``..`` segment, a backslash, NUL or another
            control character, or more than :data:`MAX_KEY_BYTES` UTF-8 bytes.
    """
    problem = None
    if not isinstance(key, str) or not key:
        problem = "it is empty"
    elif any(ord(c) < 0x20 or ord(c) == 0x7F for c in key):
        problem = "it holds NUL or another control character"
    elif "\\" in key:
        problem = "it holds a backslash"
    elif any(part in ("", ".", "..") for part in key.split("/")):
        problem = "it has an empty, '.' or '..' segment"
    else:
        try:
            size = len(key.encode("utf-8"))
        except UnicodeEncodeError:
            problem = "it is not valid Unicode"
        else:
            if size > MAX_KEY_BYTES:
                problem = f"it is {size} bytes long (S3 allows {MAX_KEY_BYTES})"
    if problem is not None:
        raise ConfigError(f"invalid S3 {what} {repr(key)[:120]}: {problem}", field=what)
    return key


_LONGEST_KEY = len(f"{'s' * 64}/data/{'0' * 32}.out") + 8
"""Longest key the store builds under its prefix (with room to spare)."""


def _validate_prefix(prefix: str) -> str:
    if not isinstance(prefix, str):
        raise ConfigError(f"prefix must be a str; got {prefix!r}", field="prefix")
    stripped = prefix.strip("/")
    if not stripped:
        return ""
    check_key(stripped, what="prefix")
    if len(stripped.encode("utf-8")) + 1 + _LONGEST_KEY > MAX_KEY_BYTES:
        raise ConfigError(
            f"prefix is too long: keys under it could exceed {MAX_KEY_BYTES} bytes",
            field="prefix",
        )
    return stripped


def _is_session(name: str) -> bool:
    try:
        validate_session(name)
    except ConfigError:
        return False
    return True


# --------------------------------------------------------------------------- errors


def _describe(exc: BaseException) -> str:
    """The first line of a foreign error, bounded (obstore appends a debug dump)."""
    text = str(exc).strip().split("\n", 1)[0] or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


@contextlib.contextmanager
def _s3_errors(action: str, *, writing: bool = False) -> Iterator[None]:
    """Translate obstore and network errors into one :class:`StoreError`, chained.

    When reading, ``FileNotFoundError`` passes through: what a missing object means is
    the caller's decision (not found, expired, or "someone else already removed it").
    So do the failed preconditions of conditional writes, which their callers settle.
    When ``writing``, a missing object (an upload aborted under us) is a failure too.
    """
    try:
        yield
    except (SpillstoreError, AlreadyExistsError, PreconditionError):
        raise
    except FileNotFoundError as exc:
        if not writing:
            raise
        raise StoreError(errno.EIO, f"{action}: {_describe(exc)}") from exc
    except (BaseError, OSError) as exc:
        denied = isinstance(exc, PermissionDeniedError | UnauthenticatedError | PermissionError)
        code = errno.EACCES if denied else errno.EIO
        raise StoreError(code, f"{action}: {_describe(exc)}") from exc


# --------------------------------------------------------------------------- sidecar


class _Sidecar(BaseModel):
    """The sidecar object: the spill's metadata and the token naming its data objects."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal[1] = 1
    data: str = Field(pattern=r"^[0-9a-f]{32}$")
    meta: SpillMeta


# --------------------------------------------------------------------------- reading


class _EmptyReader(DataReader):
    def read(self, start: int, end: int) -> bytes:
        return b""

    def buffer(self) -> bytes:
        return b""


class _S3Reader(DataReader):
    """Ranged GETs of one data object; ``buffer`` downloads it once (see the module).

    A reader lives for one operation. It keeps what it fetched (up to
    :data:`READ_WINDOW_BYTES` from its first GET), and a later read within that reach
    fetches only what is missing: a line page reads its first index block, then its last
    one, then the page between the two, so it costs two GETs instead of three.
    """

    def __init__(self, store: S3Store, meta: SpillMeta, key: str) -> None:
        self._store = store
        self._meta = meta
        self._key = key
        self._window_start = 0
        self._window = b""
        self._file: IO[bytes] | None = None
        self._mmap: mmap.mmap | None = None

    def _get(self, start: int, end: int) -> bytes:
        with self._store._missing_means_expired(self._meta), _s3_errors("cannot read spill data"):
            data = bytes(
                obstore.get_range(self._store._object_store, self._key, start=start, end=end)
            )
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
        with self._store._missing_means_expired(self._meta), _s3_errors("cannot read spill data"):
            result = obstore.get(self._store._object_store, self._key)
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
        self._mmap = mmap.mmap(spool.fileno(), 0, access=mmap.ACCESS_READ)
        return memoryview(self._mmap)

    def close(self) -> None:
        if self._mmap is not None:
            try:
                self._mmap.close()
            except BufferError:  # a caller kept a view; the mmap closes when freed
                logger.debug("spill mmap still exported; left to the garbage collector")
            self._mmap = None
        if self._file is not None:
            self._file.close()
            self._file = None


# --------------------------------------------------------------------------- writing


class _S3Sink(Sink):
    """Writes one spill: a multipart upload under a fresh token, index, then sidecar."""

    def __init__(self, store: S3Store, session: str) -> None:
        self._store = store
        self._session = session
        self._token = secrets.token_hex(16)
        self._data_key = store._key(session, "data", f"{self._token}.out")
        self._index_key = store._key(session, "data", f"{self._token}.idx")
        self._writer: WritableFile | None = None
        self._written = 0
        self._started = False
        self._keep = False  # the outcome is unknown: leave the objects to gc

    def write(self, data: bytes | memoryview) -> None:
        if not data:
            return
        if isinstance(data, memoryview) and not isinstance(data.obj, bytes):
            data = bytes(data)  # obstore keeps a reference until the part is sent
        with _s3_errors("cannot upload spill data", writing=True):
            if self._writer is None:
                self._started = True
                self._writer = obstore.open_writer(
                    self._store._object_store,
                    self._data_key,
                    buffer_size=self._store._part_bytes,
                    max_concurrency=self._store._upload_concurrency,
                )
            self._writer.write(data)
        self._written += len(data)

    def publish(self, meta: SpillMeta, index: bytes) -> SpillMeta:
        store = self._store
        spill_id = meta.spill_id
        try:
            if self._written != meta.stored_bytes:
                raise StoreError(
                    errno.EIO,
                    f"spill {spill_id}: {self._written} bytes written, expected "
                    f"{meta.stored_bytes}",
                )
            with _s3_errors(f"cannot store spill {spill_id}", writing=True):
                if self._writer is not None:
                    writer, self._writer = self._writer, None
                    writer.close()
                self._started = True
                _put_new(store._object_store, self._index_key, index)
                store._put_session_of(spill_id, self._session)
            stored = self._put_sidecar(meta)
        except BaseException:
            self.discard()
            raise
        store._forget_tombstone(self._session, spill_id)
        return stored

    def _put_sidecar(self, meta: SpillMeta) -> SpillMeta:
        store = self._store
        spill_id = meta.spill_id
        key = store._key(self._session, f"{spill_id}.json")
        body = _Sidecar(data=self._token, meta=meta).model_dump_json().encode()
        try:
            with _s3_errors(f"cannot store spill {spill_id}", writing=True):
                written = obstore.put(store._object_store, key, body, mode="create")
        except AlreadyExistsError:
            existing = store._load(self._session, spill_id)
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
                existing = store._load(self._session, spill_id)
            except (SpillstoreError, OSError):
                self._keep = True
                raise failure from failure.__cause__
            if existing is not None and existing[1] == self._token:
                return existing[0]
            raise
        store._remember(spill_id, self._session, meta, self._token, written["e_tag"])
        return meta

    def discard(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.__exit__(StoreError, None, None)  # aborts the multipart upload
            except (BaseError, OSError) as exc:
                logger.debug("aborting the upload of %s failed: %s", self._data_key, exc)
        if not self._started or self._keep:
            return
        self._started = False
        try:
            obstore.delete(self._store._object_store, [self._data_key, self._index_key])
        except (BaseError, OSError) as exc:
            logger.warning(
                "could not remove %s of a failed spill (gc removes it later): %s",
                self._data_key,
                _describe(exc),
            )


def _put_new(object_store: _ObjectStore, key: str, payload: bytes) -> None:
    """PUT an object that must not exist yet; an identical retry of ours is fine."""
    with contextlib.suppress(AlreadyExistsError):
        obstore.put(object_store, key, payload, mode="create")


# --------------------------------------------------------------------------- the store


class S3Store(Store):
    """Spills in an S3-compatible bucket: streamed, conditional, ranged, collectable.

    Args:
        bucket: the bucket (it must exist; spillstore never creates buckets).
        prefix: the key prefix every object lives under (default ``"spillstore"``;
            ``""`` for the bucket root). Validated like every key.
        endpoint: the S3 endpoint URL for MinIO, R2, a local test server, ...
            (default: ``$AWS_ENDPOINT_URL``, else AWS). An ``http://`` endpoint turns on
            ``allow_http``.
        region: the bucket's region (default: ``$AWS_REGION`` / ``$AWS_DEFAULT_REGION``).
        config: further obstore ``S3Config`` keys (credentials, ``virtual_hosted_style_
            request``, ...); by default credentials come from the usual ``AWS_*``
            environment variables, a profile's web identity, or the instance metadata.
        client_options: obstore ``ClientConfig`` (timeouts, proxy, ``allow_http``).
        retry_config: obstore ``RetryConfig`` (5xx and network errors are retried,
            10 times within 3 minutes by default).
        credential_provider: an obstore credential callback (e.g. boto3 sessions).
        clock: epoch seconds, for ``created_at``, ``gc`` and the cleaner's lease.
        retention_bytes: default retention cap (None: keep everything).
        retained_tail_bytes: default tail kept past the cap.
        tombstone_ttl: seconds a removed spill's id is remembered as expired.
        part_bytes: multipart part size (5 MiB to 5 GiB).
        upload_concurrency: parts uploaded at once per writer.

    Raises:
        ConfigError: a bad prefix, part size or concurrency, or obstore refused the
            configuration.
    """

    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        endpoint: str | None = None,
        region: str | None = None,
        config: S3Config | None = None,
        client_options: ClientConfig | None = None,
        retry_config: RetryConfig | None = None,
        credential_provider: S3CredentialProvider | None = None,
        clock: Callable[[], float] = time.time,
        retention_bytes: int | None = DEFAULT_RETENTION_BYTES,
        retained_tail_bytes: int = DEFAULT_RETAINED_TAIL_BYTES,
        tombstone_ttl: float = TOMBSTONE_TTL_SECONDS,
        part_bytes: int = PART_BYTES,
        upload_concurrency: int = UPLOAD_CONCURRENCY,
    ) -> None:
        super().__init__(
            clock=clock, retention_bytes=retention_bytes, retained_tail_bytes=retained_tail_bytes
        )
        if not isinstance(bucket, str) or not bucket:
            raise ConfigError(f"bucket must be a non-empty str; got {bucket!r}", field="bucket")
        _check_int_range("part_bytes", part_bytes, _MIN_PART_BYTES, _MAX_PART_BYTES)
        _check_int_range("upload_concurrency", upload_concurrency, 1, 64)
        self._bucket = bucket
        self._prefix = _validate_prefix(prefix)
        options: dict[str, Any] = dict(client_options or {})
        if endpoint is not None and endpoint.startswith("http://"):
            options.setdefault("allow_http", True)
        settings: dict[str, Any] = dict(config or {})
        if endpoint is not None:
            settings["endpoint"] = endpoint
        if region is not None:
            settings["region"] = region
        try:
            self._object_store = _ObjectStore(
                bucket,
                prefix=self._prefix or None,
                config=settings or None,  # type: ignore[arg-type]
                client_options=options or None,  # type: ignore[arg-type]
                retry_config=retry_config,
                credential_provider=credential_provider,
            )
        except (BaseError, ValueError, TypeError) as exc:
            raise ConfigError(f"invalid S3 configuration: {_describe(exc)}") from exc
        self._tombstone_ttl = tombstone_ttl
        self._part_bytes = part_bytes
        self._upload_concurrency = upload_concurrency
        self._cache_lock = threading.Lock()
        self._sessions: OrderedDict[str, str] = OrderedDict()
        # spill id -> (sha256, created_at, data token, sidecar ETag)
        self._tokens: OrderedDict[str, tuple[str, float, str, str | None]] = OrderedDict()

    @property
    def bucket(self) -> str:
        """The bucket."""
        return self._bucket

    @property
    def prefix(self) -> str:
        """The key prefix (no leading or trailing ``/``; empty for the bucket root)."""
        return self._prefix

    def __repr__(self) -> str:
        return f"S3Store(bucket={self._bucket!r}, prefix={self._prefix!r})"

    # ----------------------------------------------------------------- keys and caches

    def _key(self, *parts: str) -> str:
        key = check_key("/".join(parts))
        if len(self._prefix.encode("utf-8")) + 1 + len(key.encode("utf-8")) > MAX_KEY_BYTES:
            raise ConfigError(f"key {key!r} under prefix {self._prefix!r} is too long")
        return key

    def _remember(
        self, spill_id: str, session: str, meta: SpillMeta, token: str, e_tag: str | None
    ) -> None:
        with self._cache_lock:
            _cache_put(self._sessions, spill_id, session)
            _cache_put(self._tokens, spill_id, (meta.sha256, meta.created_at, token, e_tag))

    # ----------------------------------------------------------------- small objects

    def _get_small(self, key: str, limit: int, what: str) -> bytes | None:
        """GET a whole small object; None if it does not exist."""
        fetched = self._get_tagged(key, limit, what)
        return None if fetched is None else fetched[0]

    def _get_tagged(self, key: str, limit: int, what: str) -> tuple[bytes, str | None] | None:
        """GET a whole small object and its ETag; None if it does not exist."""
        try:
            with _s3_errors(f"cannot read {what}"):
                result = obstore.get(self._object_store, key)
                if result.meta["size"] > limit:
                    raise StoreError(
                        errno.EFBIG, f"{what} is implausibly large ({result.meta['size']} bytes)"
                    )
                return bytes(result.bytes()), result.meta["e_tag"]
        except FileNotFoundError:
            return None

    def _load(self, session: str, spill_id: str) -> tuple[SpillMeta, str] | None:
        """Read a sidecar: (metadata, data token), or None if there is none."""
        fetched = self._get_tagged(
            self._key(session, f"{spill_id}.json"),
            _MAX_SIDECAR_BYTES,
            f"the sidecar of spill {spill_id}",
        )
        if fetched is None:
            return None
        raw, e_tag = fetched
        try:
            sidecar = _Sidecar.model_validate_json(raw)
        except ValidationError as exc:
            raise StoreError(errno.EINVAL, f"the sidecar of spill {spill_id} is corrupt") from exc
        meta = sidecar.meta
        if meta.spill_id != spill_id or meta.session != session or meta.path is not None:
            raise StoreError(
                errno.EINVAL, f"the sidecar of spill {spill_id} names another spill or session"
            )
        self._remember(spill_id, session, meta, sidecar.data, e_tag)
        return meta, sidecar.data

    def _tombstone(self, session: str, spill_id: str) -> tuple[str | None, float | None] | None:
        raw = self._get_small(self._key(session, f"{spill_id}.gone"), 4096, "a tombstone")
        if raw is None:
            return None
        try:
            record = json.loads(raw)
            return str(record["reason"]), float(record["removed_at"])
        except (ValueError, KeyError, TypeError):
            return None, None

    def _forget_tombstone(self, session: str, spill_id: str) -> None:
        try:
            with _s3_errors("cannot remove a tombstone"):
                obstore.delete(self._object_store, self._key(session, f"{spill_id}.gone"))
        except (StoreError, FileNotFoundError) as exc:  # harmless: the sidecar wins
            logger.warning("stale tombstone of spill %s left: %s", spill_id, exc)

    def _put_session_of(self, spill_id: str, session: str) -> None:
        key = self._key(_IDS, spill_id)
        try:
            obstore.put(self._object_store, key, session.encode(), mode="create")
        except AlreadyExistsError:
            if self._session_of(spill_id, fresh=True) != session:
                raise StoreError(
                    errno.EEXIST, f"spill id {spill_id} is taken by another session"
                ) from None

    def _session_of(self, spill_id: str, *, fresh: bool = False) -> str | None:
        if not fresh:
            with self._cache_lock:
                session = self._sessions.get(spill_id)
            if session is not None:
                return session
        raw = self._get_small(self._key(_IDS, spill_id), 256, f"the session of spill {spill_id}")
        if raw is None:
            return None
        try:
            return validate_session(raw.decode("utf-8"))
        except (UnicodeDecodeError, ConfigError):
            raise StoreError(errno.EINVAL, f"the session of spill {spill_id} is corrupt") from None

    def _token_of(self, meta: SpillMeta) -> str:
        with self._cache_lock:
            cached = self._tokens.get(meta.spill_id)
        if cached is not None and cached[:2] == (meta.sha256, meta.created_at):
            return cached[2]
        loaded = self._load(meta.session, meta.spill_id)
        if loaded is None or loaded[0].sha256 != meta.sha256:
            raise self._expired(meta.session, meta.spill_id)
        return loaded[1]

    def _expired(self, session: str, spill_id: str) -> SpillstoreError:
        try:
            tombstone = self._tombstone(session, spill_id)
        except StoreError:
            tombstone = None
        return expired_error(spill_id, *(tombstone or (None, None)))

    @contextlib.contextmanager
    def _missing_means_expired(self, meta: SpillMeta) -> Iterator[None]:
        try:
            yield
        except FileNotFoundError:
            raise self._expired(meta.session, meta.spill_id) from None

    def _list_keys(self, prefix: str | None) -> tuple[builtins.list[str], builtins.list[Any]]:
        """List one level under ``prefix``: (sub-prefix names, objects)."""
        with _s3_errors("cannot list spills"):
            listing = obstore.list_with_delimiter(
                self._object_store, None if prefix is None else prefix + "/"
            )
        cut = 0 if prefix is None else len(prefix) + 1
        names = [p[cut:].rstrip("/") for p in listing["common_prefixes"]]
        return names, builtins.list(listing["objects"])

    def _session_names(self) -> builtins.list[str]:
        return sorted(name for name in self._list_keys(None)[0] if _is_session(name))

    # ----------------------------------------------------------------- primitives

    def _create(self, session: str) -> Sink:
        return _S3Sink(self, session)

    def _stat(self, spill_id: str) -> SpillMeta:
        session = self._session_of(spill_id)
        if session is None:
            raise SpillNotFound(f"no spill with id {spill_id}", spill_id=spill_id)
        loaded = self._load(session, spill_id)
        if loaded is not None:
            return loaded[0]
        tombstone = self._tombstone(session, spill_id)
        if tombstone is not None:
            raise expired_error(spill_id, *tombstone)
        # Its session is known but it was never published (a writer died before its
        # sidecar, or is publishing it right now).
        raise SpillNotFound(f"no spill with id {spill_id}", spill_id=spill_id)

    def _list(self, session: str | None) -> builtins.list[SpillMeta]:
        sessions = [session] if session is not None else self._session_names()
        wanted: builtins.list[tuple[str, str]] = []
        for name in sessions:
            _, objects = self._list_keys(self._key(name))
            cut = len(name) + 1
            for obj in objects:
                base = obj["path"][cut:]
                if base.endswith(".json") and is_spill_id(base[:-5]):
                    wanted.append((name, base[:-5]))

        def fetch(item: tuple[str, str]) -> SpillMeta | None:
            try:
                loaded = self._load(*item)
            except StoreError as exc:
                if isinstance(exc.__cause__, BaseError | OSError):
                    raise
                logger.warning("skipping spill %s: %s", item[1], exc)
                return None
            return None if loaded is None else loaded[0]

        return [meta for meta in _fan_out(fetch, wanted) if meta is not None]

    def _open(self, meta: SpillMeta) -> DataReader:
        if meta.stored_bytes == 0:
            self._token_of(meta)  # still says "expired" for a removed spill
            return _EmptyReader()
        token = self._token_of(meta)
        return _S3Reader(self, meta, self._key(meta.session, "data", f"{token}.out"))

    def _read_index(self, meta: SpillMeta) -> bytes:
        token = self._token_of(meta)
        key = self._key(meta.session, "data", f"{token}.idx")
        with self._missing_means_expired(meta):
            raw = self._get_small(key, _MAX_INDEX_BYTES, f"the index of spill {meta.spill_id}")
            if raw is None:
                raise FileNotFoundError(key)
        return raw

    def _remove(self, meta: SpillMeta, *, reason: str, now: float) -> bool:
        spill_id, session = meta.spill_id, meta.session
        loaded = self._load(session, spill_id)
        if loaded is None:
            return False
        record = json.dumps({"reason": reason, "removed_at": now}).encode()
        try:
            with _s3_errors(f"cannot write the tombstone of spill {spill_id}"):
                obstore.put(self._object_store, self._key(session, f"{spill_id}.gone"), record)
        except StoreError as exc:  # removing must work even when this fails
            logger.warning("no tombstone for spill %s: %s", spill_id, exc)
        token = loaded[1]
        with _s3_errors(f"cannot remove spill {spill_id}"):
            obstore.delete(self._object_store, self._key(session, f"{spill_id}.json"))
        try:
            with _s3_errors(f"cannot remove the data of spill {spill_id}"):
                obstore.delete(
                    self._object_store,
                    [
                        self._key(session, "data", f"{token}.out"),
                        self._key(session, "data", f"{token}.idx"),
                    ],
                )
        except StoreError as exc:  # unreferenced now: gc removes it after the grace
            logger.warning("data of removed spill %s left for gc: %s", spill_id, exc)
        return True

    # ----------------------------------------------------------------- hooks

    @contextlib.contextmanager
    def _cleaner_lock(self) -> Iterator[None]:
        with super()._cleaner_lock():
            owner = secrets.token_hex(16)
            self._take_lease(owner)
            try:
                yield
            finally:
                self._drop_lease(owner)

    def _take_lease(self, owner: str) -> None:
        key = self._key(_LOCK)
        delay = 0.05
        while True:
            body = json.dumps(
                {"owner": owner, "expires_at": self._clock() + CLEANER_LEASE_SECONDS}
            ).encode()
            with _s3_errors("cannot take the cleaner lock"):
                try:
                    obstore.put(self._object_store, key, body, mode="create")
                    return
                except AlreadyExistsError:
                    pass
                try:
                    held = obstore.get(self._object_store, key)
                    e_tag = held.meta["e_tag"]
                    expires_at = float(json.loads(bytes(held.bytes()))["expires_at"])
                except FileNotFoundError:
                    continue
                except (ValueError, KeyError, TypeError):
                    expires_at = float("-inf")  # unreadable: treat as lapsed
                if expires_at < self._clock() and e_tag is not None:
                    try:  # take over a lapsed lease, atomically (If-Match)
                        obstore.put(self._object_store, key, body, mode={"e_tag": e_tag})
                        logger.warning("took over a lapsed cleaner lock")
                        return
                    except (PreconditionError, FileNotFoundError):
                        continue
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    def _drop_lease(self, owner: str) -> None:
        key = self._key(_LOCK)
        try:
            with _s3_errors("cannot release the cleaner lock"):
                held = json.loads(bytes(obstore.get(self._object_store, key).bytes()))
                if held.get("owner") == owner:
                    obstore.delete(self._object_store, key)
        except (StoreError, FileNotFoundError, ValueError, AttributeError) as exc:
            logger.warning("cleaner lock not released (it lapses by itself): %s", exc)

    def _orphans(
        self, session: str | None, *, now: float, grace: float
    ) -> builtins.list[tuple[GcEntry, Callable[[], None]]]:
        found: builtins.list[tuple[GcEntry, Callable[[], None]]] = []
        for name in [session] if session is not None else self._session_names():
            _, objects = self._list_keys(self._key(name, "data"))
            if not objects:
                continue
            try:
                referenced = self._referenced(name)
            except StoreError as exc:  # never guess: an unread sidecar may own any object
                logger.warning("not collecting leftovers of session %s: %s", name, exc)
                continue
            cut = len(name) + 1
            for obj in objects:
                relative = obj["path"][cut:]
                matched = _DATA_RE.fullmatch(relative)
                if matched is None or matched.group(1) in referenced:
                    continue
                modified = obj["last_modified"].timestamp()
                if now - modified < grace:
                    continue
                found.append(
                    (
                        GcEntry(
                            spill_id=None,
                            session=name,
                            name=relative,
                            bytes=obj["size"],
                            reason="orphan_temp",
                            created_at=modified,
                        ),
                        self._deleter(obj["path"]),
                    )
                )
        return found

    def _referenced(self, session: str) -> set[str]:
        """The data tokens the sidecars of a session point at, read fresh.

        A cached token is reused only while the sidecar's ETag is the one it was read
        with: a spill removed and stored again by another worker has a new token.

        Raises:
            StoreError: a sidecar could not be read (then nothing is an orphan).
        """
        _, objects = self._list_keys(self._key(session))
        cut = len(session) + 1
        listed = [
            (obj["path"][cut:-5], obj["e_tag"])
            for obj in objects
            if obj["path"].endswith(".json") and is_spill_id(obj["path"][cut:-5])
        ]

        def token(item: tuple[str, str | None]) -> str:
            spill_id, e_tag = item
            with self._cache_lock:
                cached = self._tokens.get(spill_id)
            if cached is not None and e_tag is not None and cached[3] == e_tag:
                return cached[2]
            loaded = self._load(session, spill_id)
            return "" if loaded is None else loaded[1]

        return set(_fan_out(token, listed))

    def _deleter(self, key: str) -> Callable[[], None]:
        def remove() -> None:
            with _s3_errors(f"cannot remove {key}"):
                obstore.delete(self._object_store, key)

        return remove

    def _after_gc(self, *, now: float) -> None:
        known: set[str] = set()
        for name in self._session_names():
            _, objects = self._list_keys(self._key(name))
            paths = {obj["path"] for obj in objects}
            cut = len(name) + 1
            for obj in objects:
                stem, _, ext = obj["path"][cut:].rpartition(".")
                if not is_spill_id(stem):
                    continue
                if (
                    ext == "gone"
                    and now - obj["last_modified"].timestamp() > self._tombstone_ttl
                    and f"{name}/{stem}.json" not in paths
                ):
                    with contextlib.suppress(StoreError):
                        self._deleter(obj["path"])()
                    continue
                if ext in ("json", "gone"):
                    known.add(stem)
        _, pointers = self._list_keys(self._key(_IDS))
        for obj in pointers:
            spill_id = obj["path"][len(_IDS) + 1 :]
            if (
                is_spill_id(spill_id)
                and spill_id not in known
                and now - obj["last_modified"].timestamp() > self._tombstone_ttl
            ):
                with contextlib.suppress(StoreError):
                    self._deleter(obj["path"])()


def _cache_put(cache: OrderedDict[str, _T], key: str, value: _T) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > _CACHE_SIZE:
        cache.popitem(last=False)


def _check_int_range(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{name} must be an int in [{low}, {high}]; got {value!r}", field=name)


def _fan_out(func: Callable[[_T], _R], items: Sequence[_T]) -> builtins.list[_R]:
    """Apply ``func`` to every item, a few at a time (obstore releases the GIL)."""
    if len(items) <= 1:
        return [func(item) for item in items]
    with ThreadPoolExecutor(
        max_workers=min(FETCH_CONCURRENCY, len(items)), thread_name_prefix="spillstore-s3"
    ) as pool:
        return builtins.list(pool.map(func, items))
