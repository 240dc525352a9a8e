"""The one error of the client-config layer."""

from __future__ import annotations

from spillstore._errors import SpillstoreError

__all__ = ["ClientConfigError"]


class ClientConfigError(SpillstoreError, ValueError):
    """A client config that cannot be read or edited safely (malformed, changed meanwhile,
    an entry of an unexpected shape). The file is left untouched.

    Attributes:
        path: the config file (or the client/scope) the error is about.
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path
