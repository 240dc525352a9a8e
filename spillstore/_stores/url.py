"""Store URLs: one string that says where spills go, for the API, the CLI and MCP.

:func:`open_store_url` turns a store URL into a store:

- ``PATH`` or ``file://PATH``: a :class:`~spillstore.LocalStore` rooted at ``PATH``
  (``~`` expanded; ``file://`` URLs are absolute, percent-decoded, with an empty or
  ``localhost`` host: ``file:///var/spill``, ``file://~/spill``);
- ``s3://BUCKET/PREFIX``: an S3 store (``pip install "spillstore[s3]"``) on ``BUCKET``,
  keys under ``PREFIX`` (``s3://BUCKET`` alone: the store's default prefix,
  ``spillstore``). Endpoint, region and plain-HTTP permission come from the arguments
  (the CLI fills them from ``SPILLSTORE_S3_ENDPOINT``, ``SPILLSTORE_S3_REGION``,
  ``SPILLSTORE_S3_ALLOW_HTTP``), then from obstore's reading of the usual ``AWS_*``
  variables (``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``, ...);
- ``memory://``: a fresh :class:`~spillstore.MemoryStore` (its spills die with the
  process: for tests and one-process hosts).

:func:`store_for` picks the store a settings object names: its ``store`` URL if set,
else a local store at its ``dir`` (else the default cache directory).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final, Protocol
from urllib.parse import unquote, urlsplit

from spillstore._errors import ConfigError

if TYPE_CHECKING:
    from obstore.store import ClientConfig

    from spillstore._stores.base import Store

__all__ = ["SCHEMES", "StoreChoice", "open_store_url", "store_for"]

SCHEMES: Final = ("file", "s3", "memory")
"""The URL schemes a store URL may have (a string without ``://`` is a path)."""

_ENV_STORE: Final = "SPILLSTORE_STORE"


class StoreChoice(Protocol):
    """What :func:`store_for` reads (``spillstore.Settings`` has these fields)."""

    @property
    def store(self) -> str | None: ...
    @property
    def dir(self) -> os.PathLike[str] | None: ...
    @property
    def s3_endpoint(self) -> str | None: ...
    @property
    def s3_region(self) -> str | None: ...
    @property
    def s3_allow_http(self) -> bool | None: ...


def _bad(url: str, why: str) -> ConfigError:
    return ConfigError(
        f"store (env {_ENV_STORE}): {why}; got {url!r} (use PATH, file://PATH, "
        "s3://BUCKET/PREFIX or memory://)",
        field="store",
        env_var=_ENV_STORE,
    )


def _local_path(url: str) -> str:
    """The directory a ``PATH`` or ``file://`` URL names, ``~`` expanded."""
    if not url.lower().startswith("file://"):
        return os.path.expanduser(url)
    parts = urlsplit(url)
    if parts.query or parts.fragment:
        raise _bad(url, "a file:// URL takes no query or fragment")
    if parts.netloc.startswith("~"):  # file://~/x: a home-relative path
        path = unquote(parts.netloc + parts.path)
    elif parts.netloc in ("", "localhost"):
        path = unquote(parts.path)
    else:
        raise _bad(url, f"a file:// URL names a local path, not the host {parts.netloc!r}")
    if "\0" in path:
        raise _bad(url, "a path cannot hold a NUL byte (%00)")
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        raise _bad(url, "a file:// URL needs an absolute path (file:///var/spill)")
    return path


def open_store_url(
    url: str,
    *,
    s3_endpoint: str | None = None,
    s3_region: str | None = None,
    s3_allow_http: bool | None = None,
    force_root: bool = False,
) -> Store:
    """Open the store a store URL names (see the module docstring).

    Args:
        url: ``PATH``, ``file://PATH``, ``s3://BUCKET/PREFIX`` or ``memory://``.
        s3_endpoint: the S3 endpoint (default: ``AWS_ENDPOINT_URL``, else AWS).
        s3_region: the S3 region (default: ``AWS_REGION``).
        s3_allow_http: allow a plain ``http://`` endpoint (default: only when the
            endpoint given here starts with ``http://``).
        force_root: open a local root the store would refuse (see
            :class:`~spillstore.LocalStore`).

    Raises:
        ConfigError: an empty URL, an unknown scheme, a malformed URL, or ``s3://``
            without obstore installed.
        StoreError: the local root cannot be used.
    """
    if not isinstance(url, str) or not url.strip() or "\0" in url:
        raise _bad(str(url), "must be a non-empty path or URL")
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() == "file":
        from spillstore._stores.local import LocalStore  # noqa: PLC0415 - only when used

        return LocalStore(_local_path(url), force_root=force_root)
    scheme = scheme.lower()
    if scheme == "memory":
        if rest.strip("/"):
            raise _bad(url, "memory:// takes nothing after the scheme")
        from spillstore._stores.memory import MemoryStore  # noqa: PLC0415

        return MemoryStore()
    if scheme != "s3":
        raise _bad(url, f"unknown scheme {scheme!r}")
    bucket, _, prefix = rest.partition("/")
    if not bucket or any(mark in rest for mark in "?#"):
        raise _bad(url, "an s3:// URL is s3://BUCKET or s3://BUCKET/PREFIX")
    return _s3_store(bucket, prefix.strip("/"), s3_endpoint, s3_region, s3_allow_http)


def _s3_store(
    bucket: str,
    prefix: str,
    endpoint: str | None,
    region: str | None,
    allow_http: bool | None,
) -> Store:
    try:
        from spillstore._stores.s3_store import S3Store  # noqa: PLC0415 - optional dependency
    except ImportError as exc:
        raise ConfigError(
            'store (env SPILLSTORE_STORE): s3:// needs obstore: pip install "spillstore[s3]"',
            field="store",
            env_var=_ENV_STORE,
        ) from exc
    options: ClientConfig | None = {"allow_http": allow_http} if allow_http is not None else None
    if prefix:
        return S3Store(
            bucket, prefix=prefix, endpoint=endpoint, region=region, client_options=options
        )
    return S3Store(bucket, endpoint=endpoint, region=region, client_options=options)


def store_for(choice: StoreChoice, *, force_root: bool = False) -> Store:
    """The store that settings name: ``store`` if set, else a local store at ``dir``
    (``force_root`` as :func:`open_store_url` takes it)."""
    if choice.store is not None:
        return open_store_url(
            choice.store,
            s3_endpoint=choice.s3_endpoint,
            s3_region=choice.s3_region,
            s3_allow_http=choice.s3_allow_http,
            force_root=force_root,
        )
    from spillstore._stores.local import LocalStore  # noqa: PLC0415

    return LocalStore(choice.dir, force_root=force_root)
