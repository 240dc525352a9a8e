"""Spill storage: the store protocol, the operations every backend shares, and the backends.

Shared by every backend (each layer a subclass of the one before)::

    backend      Backend: the primitives and hooks a backend implements; DataReader
    cleanup      CleanupOps: delete, clean and gc over those primitives
    base         Store: writer, put, adopt, stat, list, the reads, resolve (+ async twins)
    writer       SpillWriter and AsyncSpillWriter; the Sink a backend receives bytes through
    pipeline     the writer's hash and write threads
    tally        Tally (sha256, size, newlines, UTF-8 check) a failed writer hands over
    meta         SpillMeta (the sidecar) and the tombstone record
    errors       "not found", "expired", and OSError translation

The backends::

    memory                           MemoryStore
    local, local_catalog, local_files, local_sink, local_gc, local_marks,
    local_check, local_migrate       LocalStore (one data file per spill + a SQLite catalog)
    s3_store, s3_io, s3_bucket       S3Store (public path: spillstore.s3)

The pure decisions they rely on (ids, the retention cut and line index, paging, the gc
plan) live in :mod:`spillstore._core`.
"""
