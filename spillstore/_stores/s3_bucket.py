"""The S3 store's objects: safe keys, error translation, and one bucket prefix's layout.

Every key is built by :meth:`Bucket.key`, through :func:`check_key`, which refuses
empty or ``.``/``..`` segments, backslashes, NUL and other control characters, and keys
over 1,024 UTF-8 bytes. :class:`Bucket` knows where each object lives (see the layout in
:mod:`spillstore.s3`), reads the small ones (sidecars, tombstones, session pointers) and
caches what it learnt about each spill.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, Literal, TypeVar
from urllib.parse import urlsplit

import obstore
from obstore.exceptions import (
    AlreadyExistsError,
    BaseError,
    GenericError,
    PermissionDeniedError,
    PreconditionError,
    UnauthenticatedError,
)
from obstore.store import S3Store as ObjectStore
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from spillstore._core.cache import BoundedCache
from spillstore._core.ids import is_session, validate_session
from spillstore._errors import ConfigError, SpillstoreError, StoreError
from spillstore._stores.breaker import Breaker
from spillstore._stores.errors import expired_error
from spillstore._stores.meta import (
    MAX_SIDECAR_BYTES,
    TOMBSTONE_MAX_BYTES,
    SpillMeta,
    parse_tombstone,
)

__all__ = [
    "FETCH_CONCURRENCY",
    "IDS",
    "MAX_KEY_BYTES",
    "Bucket",
    "ObjectStore",
    "Sidecar",
    "check_endpoint",
    "check_key",
    "check_printable",
    "describe",
    "fan_out",
    "is_outage",
    "is_panic",
    "probe",
    "put_new",
    "s3_errors",
    "validate_prefix",
]

logger = logging.getLogger("spillstore")

MAX_KEY_BYTES: Final = 1024
"""S3's limit on a key, prefix included (UTF-8 bytes)."""

FETCH_CONCURRENCY: Final = 8
"""Sidecars fetched at once when listing."""

IDS: Final = "_ids"
"""The key prefix of the session pointers (``_ids/<spill_id>`` holds the session)."""

CACHE_SIZE: Final = 65536
"""Spills whose session and data token are remembered."""

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


LONGEST_KEY = len(f"{'s' * 64}/data/{'0' * 32}.out") + 8
"""Longest key the store builds under its prefix (with room to spare)."""


def validate_prefix(prefix: str) -> str:
    """Return ``prefix`` without leading or trailing ``/`` if keys under it stay valid.

    Raises:
        ConfigError: it is not a str, holds an invalid segment, or is too long.
    """
    if not isinstance(prefix, str):
        raise ConfigError(f"prefix must be a str; got {prefix!r}", field="prefix")
    stripped = prefix.strip("/")
    if not stripped:
        return ""
    check_key(stripped, what="prefix")
    if len(stripped.encode("utf-8")) + 1 + LONGEST_KEY > MAX_KEY_BYTES:
        raise ConfigError(
            f"prefix is too long: keys under it could exceed {MAX_KEY_BYTES} bytes",
            field="prefix",
        )
    return stripped


# --------------------------------------------------------------------------- errors


def describe(exc: BaseException) -> str:
    """The first line of a foreign error, bounded (obstore appends a debug dump)."""
    text = str(exc).strip().split("\n", 1)[0] or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def check_endpoint(endpoint: str | None) -> None:
    """Refuse an S3 endpoint obstore cannot use: not ``http(s)://HOST[:PORT][/PATH]``,
    spaces or control characters, a port out of range. (obstore panics on these at the
    first request, a Rust panic that is not an ``Exception``.)

    Raises:
        ConfigError: naming the endpoint.
    """
    if endpoint is None:
        return
    why = None
    try:
        parts = urlsplit(endpoint)
        parts.port  # noqa: B018 - raises ValueError when out of range
    except ValueError as exc:
        why = str(exc)
    else:
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            why = "it must be http(s)://HOST[:PORT]"
        elif any(char.isspace() or not char.isprintable() for char in endpoint):
            why = "it holds spaces or control characters"
    if why is not None:
        raise ConfigError(f"invalid S3 endpoint {endpoint!r}: {why}", field="s3_endpoint")


@contextlib.contextmanager
def s3_errors(action: str, *, writing: bool = False) -> Iterator[None]:
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
        raise StoreError(errno.EIO, f"{action}: {describe(exc)}") from exc
    except (BaseError, OSError) as exc:
        denied = isinstance(exc, PermissionDeniedError | UnauthenticatedError | PermissionError)
        code = errno.EACCES if denied else errno.EIO
        raise StoreError(code, f"{action}: {describe(exc)}") from exc
    except BaseException as exc:
        if not is_panic(exc):
            raise
        raise StoreError(errno.EIO, f"{action}: obstore failed: {exc}") from exc


_STATUS: Final = re.compile(r"status code: (\d{3})")


def is_outage(exc: BaseException | None) -> bool:
    """Whether obstore's ``exc`` says the endpoint is unreachable or failing: a
    connection error, a timeout or a 5xx, retries spent (obstore raises these as
    ``GenericError``, and an upload's as a bare ``OSError`` without an errno). A reply
    that says no (a 4xx: missing, refused, precondition) is not."""
    foreign = type(exc) is OSError and exc.errno is None
    if not (isinstance(exc, GenericError) or foreign):
        return False
    found = _STATUS.search(str(exc))
    return found is None or int(found.group(1)) >= 500


def probe(objects: ObjectStore, key: str, *, any_reply: bool = False) -> str | None:
    """One HEAD request for ``key`` (a missing object is fine): None if the endpoint
    answered (with ``any_reply``, whatever its status: a 5xx too), else why not (it
    never raises; ``objects`` should not retry)."""
    try:
        obstore.head(objects, key)
    except BaseException as exc:  # a panic is a BaseException
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        if any_reply and _STATUS.search(str(exc)) is not None:
            return None
        return describe(exc) if is_outage(exc) or is_panic(exc) else None
    return None


def is_panic(exc: BaseException) -> bool:
    """Whether ``exc`` is pyo3's ``PanicException`` (obstore's Rust code panicked): a
    ``BaseException``, so ``except Exception`` lets it through."""
    return type(exc).__name__ == "PanicException"


def check_printable(what: str, value: str | None) -> None:
    """Refuse a bucket, region or credential holding spaces or control characters
    (obstore panics on them in a request header or URI).

    Raises:
        ConfigError: naming ``what`` (never the value: it may be a secret).
    """
    if value is not None and any(c.isspace() or not c.isprintable() for c in value):
        raise ConfigError(f"invalid S3 {what}: it holds spaces or control characters")


# --------------------------------------------------------------------------- objects


class Sidecar(BaseModel):
    """The sidecar object: the spill's metadata and the token naming its data objects."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal[1] = 1
    data: str = Field(pattern=r"^[0-9a-f]{32}$")
    meta: SpillMeta


def put_new(object_store: ObjectStore, key: str, payload: bytes) -> None:
    """PUT an object that must not exist yet; an identical retry of ours is fine."""
    with contextlib.suppress(AlreadyExistsError):
        obstore.put(object_store, key, payload, mode="create")


def fan_out(func: Callable[[_T], _R], items: Sequence[_T]) -> builtins.list[_R]:
    """Apply ``func`` to every item, a few at a time (obstore releases the GIL)."""
    if len(items) <= 1:
        return [func(item) for item in items]
    with ThreadPoolExecutor(
        max_workers=min(FETCH_CONCURRENCY, len(items)), thread_name_prefix="spillstore-s3"
    ) as pool:
        return builtins.list(pool.map(func, items))


class Bucket:
    """One store's objects: keys under its prefix, the small objects, and two caches.

    Args:
        objects: the obstore handle (it adds the prefix to every key itself).
        prefix: the validated prefix, for measuring keys.
        breaker: the store's circuit breaker (None: every request tries the endpoint).
    """

    def __init__(self, objects: ObjectStore, prefix: str, breaker: Breaker | None = None) -> None:
        self.objects = objects
        self.prefix = prefix
        self.breaker = breaker
        self._sessions: BoundedCache[str, str] = BoundedCache(CACHE_SIZE)
        # spill id -> (sha256, created_at, data token, sidecar ETag)
        self._tokens: BoundedCache[str, tuple[str, float, str, str | None]] = BoundedCache(
            CACHE_SIZE
        )

    def key(self, *parts: str) -> str:
        """The key of ``parts`` joined by ``/``, checked (relative to the prefix).

        Raises:
            ConfigError: an unsafe key, or one too long under the prefix.
        """
        key = check_key("/".join(parts))
        if len(self.prefix.encode("utf-8")) + 1 + len(key.encode("utf-8")) > MAX_KEY_BYTES:
            raise ConfigError(f"key {key!r} under prefix {self.prefix!r} is too long")
        return key

    @contextlib.contextmanager
    def request(
        self, action: str, *, writing: bool = False, forced: bool = False
    ) -> Iterator[None]:
        """:func:`s3_errors` for the requests in the block, behind the breaker: they fail
        fast while the endpoint is known to be down, and an outage (:func:`is_outage`)
        among them opens the breaker (once: a block around another one that failed sees
        the breaker open already). ``forced`` requests go even then, and leave the
        breaker as it is (reading back what a write that timed out did).

        Raises:
            StoreError: the endpoint is known to be down, or a request failed.
        """
        breaker = self.breaker
        if breaker is None or forced:
            with s3_errors(action, writing=writing):
                yield
            return
        breaker.admit()
        try:
            with s3_errors(action, writing=writing):
                yield
        except StoreError as exc:
            if is_outage(exc.__cause__):
                breaker.failed(exc.strerror or describe(exc))
            raise

    def remember(
        self, spill_id: str, session: str, meta: SpillMeta, token: str, e_tag: str | None
    ) -> None:
        """Cache a spill's session and data token (with the sidecar's ETag)."""
        self._sessions.put(spill_id, session)
        self._tokens.put(spill_id, (meta.sha256, meta.created_at, token, e_tag))

    def cached_token(self, spill_id: str) -> tuple[str, float, str, str | None] | None:
        """The cached ``(sha256, created_at, data token, sidecar ETag)`` of a spill."""
        return self._tokens.get(spill_id)

    def get_small(self, key: str, limit: int, what: str) -> bytes | None:
        """GET a whole small object; None if it does not exist."""
        fetched = self.get_tagged(key, limit, what)
        return None if fetched is None else fetched[0]

    def get_tagged(
        self, key: str, limit: int, what: str, *, forced: bool = False
    ) -> tuple[bytes, str | None] | None:
        """GET a whole small object and its ETag; None if it does not exist (``forced``:
        see :meth:`request`)."""
        try:
            with self.request(f"cannot read {what}", forced=forced):
                result = obstore.get(self.objects, key)
                if result.meta["size"] > limit:
                    raise StoreError(
                        errno.EFBIG, f"{what} is implausibly large ({result.meta['size']} bytes)"
                    )
                return bytes(result.bytes()), result.meta["e_tag"]
        except FileNotFoundError:
            return None

    def load(
        self, session: str, spill_id: str, *, forced: bool = False
    ) -> tuple[SpillMeta, str] | None:
        """Read a sidecar: (metadata, data token), or None if there is none (``forced``:
        see :meth:`request`)."""
        fetched = self.get_tagged(
            self.key(session, f"{spill_id}.json"),
            MAX_SIDECAR_BYTES,
            f"the sidecar of spill {spill_id}",
            forced=forced,
        )
        if fetched is None:
            return None
        raw, e_tag = fetched
        try:
            sidecar = Sidecar.model_validate_json(raw)
        except ValidationError as exc:
            raise StoreError(errno.EINVAL, f"the sidecar of spill {spill_id} is corrupt") from exc
        meta = sidecar.meta
        if meta.spill_id != spill_id or meta.session != session or meta.path is not None:
            raise StoreError(
                errno.EINVAL, f"the sidecar of spill {spill_id} names another spill or session"
            )
        self.remember(spill_id, session, meta, sidecar.data, e_tag)
        return meta, sidecar.data

    def tombstone(self, session: str, spill_id: str) -> tuple[str | None, float | None] | None:
        """A removed spill's ``(reason, removed_at)``; None if it has no tombstone."""
        raw = self.get_small(
            self.key(session, f"{spill_id}.gone"), TOMBSTONE_MAX_BYTES, "a tombstone"
        )
        return None if raw is None else parse_tombstone(raw)

    def forget_tombstone(self, session: str, spill_id: str) -> None:
        """Remove the tombstone of a spill stored again; a failure is only logged."""
        try:
            with self.request("cannot remove a tombstone"):
                obstore.delete(self.objects, self.key(session, f"{spill_id}.gone"))
        except (StoreError, FileNotFoundError) as exc:  # harmless: the sidecar wins
            logger.warning("stale tombstone of spill %s left: %s", spill_id, exc)

    def put_session_of(self, spill_id: str, session: str) -> None:
        """Record (create-only) which session holds ``spill_id``.

        Raises:
            StoreError: another session already holds that id.
        """
        key = self.key(IDS, spill_id)
        try:
            obstore.put(self.objects, key, session.encode(), mode="create")
        except AlreadyExistsError:
            if self.session_of(spill_id, fresh=True) != session:
                raise StoreError(
                    errno.EEXIST, f"spill id {spill_id} is taken by another session"
                ) from None

    def session_of(self, spill_id: str, *, fresh: bool = False) -> str | None:
        """The session holding (or that held) ``spill_id``; None if none ever did."""
        if not fresh:
            session = self._sessions.get(spill_id)
            if session is not None:
                return session
        raw = self.get_small(self.key(IDS, spill_id), 256, f"the session of spill {spill_id}")
        if raw is None:
            return None
        try:
            return validate_session(raw.decode("utf-8"))
        except (UnicodeDecodeError, ConfigError):
            raise StoreError(errno.EINVAL, f"the session of spill {spill_id} is corrupt") from None

    def token_of(self, meta: SpillMeta) -> str:
        """The token naming a spill's data objects, checked against a fresh sidecar.

        Raises:
            SpillExpired: the spill was removed (or replaced) since ``meta`` was read.
        """
        cached = self.cached_token(meta.spill_id)
        if cached is not None and cached[:2] == (meta.sha256, meta.created_at):
            return cached[2]
        loaded = self.load(meta.session, meta.spill_id)
        if loaded is None or loaded[0].sha256 != meta.sha256:
            raise self.expired(meta.session, meta.spill_id)
        return loaded[1]

    def expired(self, session: str, spill_id: str) -> SpillstoreError:
        """The error for a spill that is gone, with its tombstone's reason if readable."""
        try:
            tombstone = self.tombstone(session, spill_id)
        except StoreError:
            tombstone = None
        return expired_error(spill_id, *(tombstone or (None, None)))

    @contextlib.contextmanager
    def missing_means_expired(self, meta: SpillMeta) -> Iterator[None]:
        """Turn a missing object of ``meta``'s spill into :meth:`expired`."""
        try:
            yield
        except FileNotFoundError:
            raise self.expired(meta.session, meta.spill_id) from None

    def list_keys(self, prefix: str | None) -> tuple[builtins.list[str], builtins.list[Any]]:
        """List one level under ``prefix``: (sub-prefix names, objects)."""
        with self.request("cannot list spills"):
            listing = obstore.list_with_delimiter(
                self.objects, None if prefix is None else prefix + "/"
            )
        cut = 0 if prefix is None else len(prefix) + 1
        names = [p[cut:].rstrip("/") for p in listing["common_prefixes"]]
        return names, builtins.list(listing["objects"])

    def session_names(self) -> builtins.list[str]:
        """The sessions under the prefix, sorted."""
        return sorted(name for name in self.list_keys(None)[0] if is_session(name))

    def deleter(self, key: str) -> Callable[[], bool]:
        """A function that deletes the object ``key`` (and returns True)."""

        def remove() -> bool:
            with self.request(f"cannot remove {key}"):
                obstore.delete(self.objects, key)
            return True

        return remove
