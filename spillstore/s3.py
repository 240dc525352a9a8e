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
8 MiB and otherwise streamed into an anonymous temporary file that is
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

When the endpoint stops answering (connections refused or hanging, 5xx once the
retries are spent), the store opens a circuit breaker: for ``outage_pause`` seconds
(default :data:`OUTAGE_PAUSE_SECONDS`) every request fails at once with a
``StoreError`` naming the failure, so a tool call gets its "NOT saved" preview without
waiting and a read of an earlier spill a short error. The store's first request, and
the first after the pause, probes the endpoint with one HEAD (no retries, a 5 s timeout:
all a black hole costs the first call); each failed probe doubles
the pause, up to :data:`OUTAGE_MAX_PAUSE_SECONDS`, and an endpoint that answers is used
again at once.

Every key is built by one function that refuses empty or ``.``/``..`` segments,
backslashes, NUL and other control characters, and keys over 1,024 UTF-8 bytes.

This module is the public path; the implementation lives in ``spillstore._stores``
(``s3_store``, ``s3_io``, ``s3_bucket``).
"""

from __future__ import annotations

try:
    import obstore  # noqa: F401 - imported first, to name the extra when it is missing
except ImportError as exc:  # pragma: no cover - the test environment has obstore
    raise ImportError('spillstore.s3 needs obstore: pip install "spillstore[s3]"') from exc

from spillstore._stores.s3_bucket import check_key
from spillstore._stores.s3_store import (
    DEFAULT_PREFIX,
    OUTAGE_MAX_PAUSE_SECONDS,
    OUTAGE_PAUSE_SECONDS,
    PART_BYTES,
    UPLOAD_CONCURRENCY,
    S3Store,
)

__all__ = [
    "DEFAULT_PREFIX",
    "OUTAGE_MAX_PAUSE_SECONDS",
    "OUTAGE_PAUSE_SECONDS",
    "PART_BYTES",
    "UPLOAD_CONCURRENCY",
    "S3Store",
    "check_key",
]
