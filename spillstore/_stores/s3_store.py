"""The S3 store: the store protocol over a bucket prefix (see :mod:`spillstore.s3`).

The objects and their keys are :mod:`~spillstore._stores.s3_bucket`'s, the data's
reads and writes :mod:`~spillstore._stores.s3_io`'s. Here are the primitives, and the
hooks only a fleet needs: a cleaner lease taken with conditional writes, leftovers of
dead writers found by their unreferenced data token, and pruning old tombstones and
session pointers.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import os
import re
import secrets
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError, PreconditionError

from spillstore._core.checks import check_int
from spillstore._core.gc_plan import GcEntry
from spillstore._core.ids import is_spill_id
from spillstore._core.index import DEFAULT_RETAINED_TAIL_BYTES, DEFAULT_RETENTION_BYTES
from spillstore._errors import ConfigError, StoreError
from spillstore._stores.backend import BytesReader, DataReader
from spillstore._stores.base import Store
from spillstore._stores.breaker import OUTAGE_MAX_PAUSE_SECONDS, OUTAGE_PAUSE_SECONDS, Breaker
from spillstore._stores.breaker_file import shared_outage
from spillstore._stores.errors import expired_error, not_found_error
from spillstore._stores.meta import MAX_INDEX_BYTES, SpillMeta, tombstone_record
from spillstore._stores.s3_bucket import (
    IDS,
    Bucket,
    ObjectStore,
    check_endpoint,
    check_printable,
    describe,
    fan_out,
    probe,
    validate_prefix,
)
from spillstore._stores.s3_io import S3Reader, S3Sink
from spillstore._stores.s3_options import (
    CONNECT_TIMEOUT,
    PROBE_TIMEOUT,
    READ_TIMEOUT,
    REQUEST_TIMEOUT,
    RETRIES,
    RETRY_SECONDS,
    default_retries,
    with_timeouts,
)
from spillstore._stores.writer import Sink

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig, S3Config, S3CredentialProvider

__all__ = [
    "CLEANER_LEASE_SECONDS",
    "CONNECT_TIMEOUT",
    "DEFAULT_PREFIX",
    "OUTAGE_MAX_PAUSE_SECONDS",
    "OUTAGE_PAUSE_SECONDS",
    "PART_BYTES",
    "PROBE_TIMEOUT",
    "READ_TIMEOUT",
    "REQUEST_TIMEOUT",
    "RETRIES",
    "RETRY_SECONDS",
    "TOMBSTONE_TTL_SECONDS",
    "UPLOAD_CONCURRENCY",
    "S3Store",
]

logger = logging.getLogger("spillstore")

DEFAULT_PREFIX: Final = "spillstore"
"""The key prefix spills live under when none is given."""

PART_BYTES: Final = 8 << 20
"""Default multipart part size (S3 requires at least 5 MiB for all parts but the last)."""

UPLOAD_CONCURRENCY: Final = 2
"""Default number of parts uploaded at once; memory per writer is about
``(upload_concurrency + 1) * part_bytes``."""

TOMBSTONE_TTL_SECONDS: Final = 7 * 24 * 3600.0
"""How long a removed spill's id is remembered (``gc`` prunes older tombstones)."""

CLEANER_LEASE_SECONDS: Final = 600.0
"""A cleaner's lock lapses this long after it was taken (a crashed cleaner's lock is
then taken over); cleaners wait, polling, while another holds a live lease."""

MIN_PART_BYTES: Final = 5 << 20
MAX_PART_BYTES: Final = 5 << 30
LOCK: Final = "_cleaner.lock"
DATA_RE: Final = re.compile(r"data/([0-9a-f]{32})\.(?:out|idx)")


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
        client_options: obstore ``ClientConfig`` (timeouts, proxy, ``allow_http``);
            ``connect_timeout``, ``read_timeout`` and ``timeout`` default to
            :data:`CONNECT_TIMEOUT`, :data:`READ_TIMEOUT` and :data:`REQUEST_TIMEOUT`.
        retry_config: obstore ``RetryConfig`` (5xx and network errors are retried;
            default :data:`RETRIES` times within :data:`RETRY_SECONDS`, so a dead
            endpoint costs a tool call about a minute at most, not several).
        credential_provider: an obstore credential callback (e.g. boto3 sessions).
        outage_pause: seconds every request fails fast (a StoreError, so a tool call gets
            its "NOT saved" preview at once) after one found the endpoint unreachable or
            failing; then one probe (a HEAD, :data:`PROBE_TIMEOUT`) decides, and each
            failed probe doubles the pause, up to :data:`OUTAGE_MAX_PAUSE_SECONDS`
            (see :mod:`spillstore._stores.breaker`). The store's first request is
            probed too, so an endpoint that never answers costs it the probe's timeout.
            Default :data:`OUTAGE_PAUSE_SECONDS`; None: every request tries the
            endpoint (and nothing is probed).
        clock: epoch seconds, for ``created_at``, ``gc``, the cleaner's lease and the
            outage pauses.
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
        outage_pause: float | None = OUTAGE_PAUSE_SECONDS,
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
        check_int("part_bytes", part_bytes, minimum=MIN_PART_BYTES, maximum=MAX_PART_BYTES)
        check_int("upload_concurrency", upload_concurrency, minimum=1, maximum=64)
        if outage_pause is not None and not (
            isinstance(outage_pause, int | float) and 0 < outage_pause < float("inf")
        ):
            raise ConfigError(
                f"outage_pause must be a positive number of seconds or None; got {outage_pause!r}",
                field="outage_pause",
            )
        self._bucket_name = bucket
        prefix = validate_prefix(prefix)
        options = with_timeouts(client_options)
        retry_config = default_retries() if retry_config is None else retry_config
        if endpoint is not None and endpoint.startswith("http://"):
            options.setdefault("allow_http", True)
        settings: dict[str, Any] = dict(config or {})
        if endpoint is not None:
            settings["endpoint"] = endpoint
        check_printable("bucket", bucket)
        check_printable("region", region or settings.get("region") or os.environ.get("AWS_REGION"))
        for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            check_printable(f"credential ${variable}", os.environ.get(variable))
        endpoint_url = (
            settings.get("endpoint")
            or settings.get("aws_endpoint")
            or settings.get("aws_endpoint_url")
            or os.environ.get("AWS_ENDPOINT_URL")
            or os.environ.get("AWS_ENDPOINT")
        )
        check_endpoint(endpoint_url)
        if region is not None:
            settings["region"] = region

        def objects(options: dict[str, Any], retry_config: RetryConfig) -> ObjectStore:
            try:
                return ObjectStore(
                    bucket,
                    prefix=prefix or None,
                    config=settings or None,  # type: ignore[arg-type]
                    client_options=options or None,  # type: ignore[arg-type]
                    retry_config=retry_config,
                    credential_provider=credential_provider,
                )
            except (BaseError, ValueError, TypeError) as exc:
                raise ConfigError(f"invalid S3 configuration: {describe(exc)}") from exc

        breaker = None
        if outage_pause is not None:
            probing = objects({**options, "timeout": PROBE_TIMEOUT}, {"max_retries": 0})
            breaker = Breaker(
                clock,
                lambda: probe(probing, "_probe"),
                first_pause=outage_pause,
                max_pause=max(outage_pause, OUTAGE_MAX_PAUSE_SECONDS),
                reach=lambda: probe(probing, "_probe", any_reply=True),
                shared=shared_outage(endpoint_url, region, bucket),
            )
        self._bucket = Bucket(objects(options, retry_config), prefix, breaker)
        self._tombstone_ttl = tombstone_ttl
        self._part_bytes = part_bytes
        self._upload_concurrency = upload_concurrency

    @property
    def bucket(self) -> str:
        """The bucket."""
        return self._bucket_name

    @property
    def prefix(self) -> str:
        """The key prefix (no leading or trailing ``/``; empty for the bucket root)."""
        return self._bucket.prefix

    def __repr__(self) -> str:
        return f"S3Store(bucket={self._bucket_name!r}, prefix={self._bucket.prefix!r})"

    # ----------------------------------------------------------------- primitives

    def _create(self, session: str) -> Sink:
        return S3Sink(
            self._bucket,
            session,
            part_bytes=self._part_bytes,
            upload_concurrency=self._upload_concurrency,
        )

    def _stat(self, spill_id: str) -> SpillMeta:
        session = self._bucket.session_of(spill_id)
        if session is None:
            raise not_found_error(spill_id)
        loaded = self._bucket.load(session, spill_id)
        if loaded is not None:
            return loaded[0]
        tombstone = self._bucket.tombstone(session, spill_id)
        if tombstone is not None:
            raise expired_error(spill_id, *tombstone)
        # Its session is known but it was never published (a writer died before its
        # sidecar, or is publishing it right now).
        raise not_found_error(spill_id)

    def _list(self, session: str | None) -> builtins.list[SpillMeta]:
        sessions = [session] if session is not None else self._bucket.session_names()
        wanted: builtins.list[tuple[str, str]] = []
        for name in sessions:
            _, objects = self._bucket.list_keys(self._bucket.key(name))
            cut = len(name) + 1
            for obj in objects:
                base = obj["path"][cut:]
                if base.endswith(".json") and is_spill_id(base[:-5]):
                    wanted.append((name, base[:-5]))

        def fetch(item: tuple[str, str]) -> SpillMeta | None:
            try:
                loaded = self._bucket.load(*item)
            except StoreError as exc:
                if isinstance(exc.__cause__, BaseError | OSError):
                    raise
                logger.warning("skipping spill %s: %s", item[1], exc)
                return None
            return None if loaded is None else loaded[0]

        return [meta for meta in fan_out(fetch, wanted) if meta is not None]

    def _open(self, meta: SpillMeta) -> DataReader:
        if meta.stored_bytes == 0:
            self._bucket.token_of(meta)  # still says "expired" for a removed spill
            return BytesReader(b"")
        token = self._bucket.token_of(meta)
        return S3Reader(self._bucket, meta, self._bucket.key(meta.session, "data", f"{token}.out"))

    def _read_index(self, meta: SpillMeta) -> bytes:
        token = self._bucket.token_of(meta)
        key = self._bucket.key(meta.session, "data", f"{token}.idx")
        with self._bucket.missing_means_expired(meta):
            raw = self._bucket.get_small(
                key, MAX_INDEX_BYTES, f"the index of spill {meta.spill_id}"
            )
            if raw is None:
                raise FileNotFoundError(key)
        return raw

    def _remove(self, meta: SpillMeta, *, reason: str, now: float) -> bool:
        spill_id, session = meta.spill_id, meta.session
        loaded = self._bucket.load(session, spill_id)
        if loaded is None:
            return False
        try:
            with self._bucket.request(f"cannot write the tombstone of spill {spill_id}"):
                obstore.put(
                    self._bucket.objects,
                    self._bucket.key(session, f"{spill_id}.gone"),
                    tombstone_record(reason, now),
                )
        except StoreError as exc:  # removing must work even when this fails
            logger.warning("no tombstone for spill %s: %s", spill_id, exc)
        token = loaded[1]
        with self._bucket.request(f"cannot remove spill {spill_id}"):
            obstore.delete(self._bucket.objects, self._bucket.key(session, f"{spill_id}.json"))
        try:
            with self._bucket.request(f"cannot remove the data of spill {spill_id}"):
                obstore.delete(
                    self._bucket.objects,
                    [
                        self._bucket.key(session, "data", f"{token}.out"),
                        self._bucket.key(session, "data", f"{token}.idx"),
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
        key = self._bucket.key(LOCK)
        delay = 0.05
        while True:
            body = json.dumps(
                {"owner": owner, "expires_at": self._clock() + CLEANER_LEASE_SECONDS}
            ).encode()
            with self._bucket.request("cannot take the cleaner lock"):
                try:
                    obstore.put(self._bucket.objects, key, body, mode="create")
                    return
                except AlreadyExistsError:
                    pass
                try:
                    held = obstore.get(self._bucket.objects, key)
                    e_tag = held.meta["e_tag"]
                    expires_at = float(json.loads(bytes(held.bytes()))["expires_at"])
                except FileNotFoundError:
                    continue
                except (ValueError, KeyError, TypeError):
                    expires_at = float("-inf")  # unreadable: treat as lapsed
                if expires_at < self._clock() and e_tag is not None:
                    try:  # take over a lapsed lease, atomically (If-Match)
                        obstore.put(self._bucket.objects, key, body, mode={"e_tag": e_tag})
                        logger.warning("took over a lapsed cleaner lock")
                        return
                    except (PreconditionError, FileNotFoundError):
                        continue
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    def _drop_lease(self, owner: str) -> None:
        key = self._bucket.key(LOCK)
        try:
            with self._bucket.request("cannot release the cleaner lock"):
                held = json.loads(bytes(obstore.get(self._bucket.objects, key).bytes()))
                if held.get("owner") == owner:
                    obstore.delete(self._bucket.objects, key)
        except (StoreError, FileNotFoundError, ValueError, AttributeError) as exc:
            logger.warning("cleaner lock not released (it lapses by itself): %s", exc)

    def _orphans(
        self, session: str | None, *, now: float, grace: float
    ) -> builtins.list[tuple[GcEntry, Callable[[], bool]]]:
        found: builtins.list[tuple[GcEntry, Callable[[], bool]]] = []
        for name in [session] if session is not None else self._bucket.session_names():
            _, objects = self._bucket.list_keys(self._bucket.key(name, "data"))
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
                matched = DATA_RE.fullmatch(relative)
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
                        self._bucket.deleter(obj["path"]),
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
        _, objects = self._bucket.list_keys(self._bucket.key(session))
        cut = len(session) + 1
        listed = [
            (obj["path"][cut:-5], obj["e_tag"])
            for obj in objects
            if obj["path"].endswith(".json") and is_spill_id(obj["path"][cut:-5])
        ]

        def token(item: tuple[str, str | None]) -> str:
            spill_id, e_tag = item
            cached = self._bucket.cached_token(spill_id)
            if cached is not None and e_tag is not None and cached[3] == e_tag:
                return cached[2]
            loaded = self._bucket.load(session, spill_id)
            return "" if loaded is None else loaded[1]

        return set(fan_out(token, listed))

    def _after_gc(self, *, now: float) -> None:
        known: set[str] = set()
        for name in self._bucket.session_names():
            _, objects = self._bucket.list_keys(self._bucket.key(name))
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
                        self._bucket.deleter(obj["path"])()
                    continue
                if ext in ("json", "gone"):
                    known.add(stem)
        _, pointers = self._bucket.list_keys(self._bucket.key(IDS))
        for obj in pointers:
            spill_id = obj["path"][len(IDS) + 1 :]
            if (
                is_spill_id(spill_id)
                and spill_id not in known
                and now - obj["last_modified"].timestamp() > self._tombstone_ttl
            ):
                with contextlib.suppress(StoreError):
                    self._bucket.deleter(obj["path"])()
