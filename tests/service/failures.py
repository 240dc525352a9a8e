"""Store failures and programming errors, shared by the service's failure tests."""

from __future__ import annotations

import errno
from collections.abc import Iterable

from spillstore._errors import ConfigError, StoreError, UsageError
from spillstore._stores.memory import MemoryStore
from spillstore._stores.meta import SpillMeta

DEAD_BACKENDS = [
    StoreError(errno.ENOSPC, "No space left on device"),
    ConnectionError("connection refused by the object store"),
    TimeoutError("the object store did not answer"),
    PermissionError(errno.EACCES, "Permission denied"),
]
"""What a full disk or a dead backend raises: the tool call must not fail on them."""

BUGS = [
    AttributeError("'Store' object has no attribute 'putt'"),
    TypeError("put() got an unexpected keyword argument 'media_note'"),
    ConfigError("session must match [A-Za-z0-9._-]", field="session"),
    UsageError("this spill writer is already committed"),
]
"""Programming errors: they must surface as themselves, never as "NOT saved"."""


class FailingStore(MemoryStore):
    """A store whose every put raises ``error`` (its async twin runs put in a thread)."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def put(self, data: Iterable[bytes | str] | bytes | str, **kwargs: object) -> SpillMeta:  # type: ignore[override]
        raise self.error
