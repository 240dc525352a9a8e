"""The model-facing recovery tools: Read, Grep, List and Query over spills (design.md §5).

These tools are how a model gets back what a cap cut, so every result is short, exact
and ready to act on:

- **Read** (``read_spill``, :mod:`~spillstore._tools.read`) pages a spill by lines or
  by bytes, naming the exact range shown and ending with the exact next call.
- **Grep** (``grep_spill``, :mod:`~spillstore._tools.grep`) searches one spill or every
  spill of the session with RE2 on bytes, in linear time, with ``head_limit``/``offset``
  paging.
- **List** (``list_spills``, :mod:`~spillstore._tools.list`) shows the spills of the
  session, newest last, so a model can find them again after its context was compacted.
- **Query** (``query_spill``, :mod:`~spillstore._tools.query`) runs a jq expression over
  a spill that holds JSON or JSON Lines, in a killable worker process, and gives each
  result with its exact byte range (and line, for JSON Lines).

This module is the front of the four: :class:`SpillTools` validates arguments (from a
model, as a dict or JSON string, or from Python through the typed shells), resolves the
spill, dispatches to the page, and turns every error into a result. Every result is a
:class:`~spillstore.ToolResult` marked ``spill_exempt`` (the service passes it through
untouched, so reading a spill never spills again) and **never exceeds
``max_page_bytes``** UTF-8 bytes, header and hints included. Errors the model should act
on (unknown or expired spill, bad offset, bad pattern, a path outside the store, invalid
arguments) are short text results with ``is_error=True``, never exceptions; only a
developer's mistake (bad constructor arguments) raises :class:`~spillstore.ConfigError`.

Confinement is the store's job (ids are validated on every read; a path is mapped to an
id by :meth:`Store.resolve`, which refuses anything that is not a spill data file inside
the store; local files are opened ``O_NOFOLLOW|O_NONBLOCK`` and must be regular files
with one link). No tool module opens a path itself. By default the tools also stay in
their own session: a spill of another session is answered as unknown.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from spillstore._content import ToolResult
from spillstore._core.cache import BoundedCache
from spillstore._core.checks import check_int
from spillstore._core.ids import is_spill_id, validate_session
from spillstore._errors import ConfigError, RequestRefused, SpillNotFound, SpillstoreError
from spillstore._stores.base import Store
from spillstore._stores.meta import SpillMeta
from spillstore._tools.args import (
    DEFAULT_HEAD_LIMIT,
    DEFAULT_LIST_LIMIT,
    DEFAULT_QUERY_LIMIT,
    DEFAULT_READ_LIMIT,
    SPECS,
    GrepArgs,
    ListArgs,
    QueryArgs,
    ReadArgs,
    ToolArgs,
    ToolSpec,
    parameters,
)
from spillstore._tools.text import (
    ToolNames,
    bounded,
    describe_validation,
    explain,
    quote,
    result,
)
from spillstore._twins import method_twin

if TYPE_CHECKING:
    from spillstore._tools.query_worker import QueryWorker

_STARTING = threading.Lock()

__all__ = [
    "DEFAULT_MAX_COLUMN_BYTES",
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_MAX_PAGE_BYTES",
    "MIN_PAGE_BYTES",
    "SpillTools",
    "delegate_read",
]

log = logging.getLogger("spillstore")

DEFAULT_MAX_PAGE_BYTES = 16_000
"""The default page cap: well under the service's 50,000-byte inline budget."""

MIN_PAGE_BYTES = 2048
"""The smallest page cap accepted: room for the header, hints and some content."""

DEFAULT_MAX_LINE_BYTES = 2000
"""Read cuts a line longer than this (cosmetically) and says where it continues."""

DEFAULT_MAX_COLUMN_BYTES = 400
"""Grep shows at most this many bytes of a matching line, around the match."""

META_CACHE_SIZE = 256
"""Spill metadata kept by Read (ids are content-derived: metadata never changes)."""

SCHEMA_SHAPES = ("openai", "anthropic")


class SpillTools:
    """The Read, Grep, List and Query tools over one store, for one session.

    ``read``, ``grep``, ``list`` and ``query`` are typed shells for Python callers;
    ``call`` takes a model's raw arguments. ``aread``, ``agrep``, ``alist``, ``aquery``
    and ``acall`` are their async twins: the same call in a worker thread, same
    arguments, same results. Queries run in a child process started on the first query
    (``close`` stops it; it also stops when this object is collected).

    Args:
        store: the spill store (``LocalStore``, ``MemoryStore``, ...).
        session: the session whose spills Grep and List cover, and (unless
            ``cross_session``) the only session Read may read from.
        max_page_bytes: the most UTF-8 bytes of any result, header and hints included.
        max_line_bytes: Read cuts lines longer than this, saying where they continue
            (default 2,000, or a quarter of the page cap if smaller; at most half of it).
        max_column_bytes: Grep shows at most this many bytes of a matching line
            (default 400, or a quarter of the page cap if smaller; at most half of it).
        read_name, grep_name, list_name, query_name: the tool names the model sees
            (and that the continuation hints use); they must match the names the
            service's pointer uses.
        cross_session: allow reading and listing spills of other sessions.

    Raises:
        ConfigError: an argument is invalid (a developer error).
    """

    def __init__(
        self,
        store: Store,
        *,
        session: str = "default",
        max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES,
        max_line_bytes: int | None = None,
        max_column_bytes: int | None = None,
        read_name: str = "read_spill",
        grep_name: str = "grep_spill",
        list_name: str = "list_spills",
        query_name: str = "query_spill",
        cross_session: bool = False,
    ) -> None:
        if not isinstance(store, Store):
            raise ConfigError(f"store must be a spillstore Store; got {type(store).__name__}")
        validate_session(session)
        check_int("max_page_bytes", max_page_bytes, minimum=MIN_PAGE_BYTES)
        if max_line_bytes is None:
            max_line_bytes = min(DEFAULT_MAX_LINE_BYTES, max_page_bytes // 4)
        if max_column_bytes is None:
            max_column_bytes = min(DEFAULT_MAX_COLUMN_BYTES, max_page_bytes // 4)
        check_int("max_line_bytes", max_line_bytes, minimum=16)
        check_int("max_column_bytes", max_column_bytes, minimum=16)
        if max_line_bytes > max_page_bytes // 2:
            raise ConfigError(
                f"max_line_bytes ({max_line_bytes}) must be at most half of max_page_bytes "
                f"({max_page_bytes})",
                field="max_line_bytes",
            )
        if max_column_bytes > max_page_bytes // 2:
            raise ConfigError(
                f"max_column_bytes ({max_column_bytes}) must be at most half of "
                f"max_page_bytes ({max_page_bytes})",
                field="max_column_bytes",
            )
        names = (read_name, grep_name, list_name, query_name)
        fields = ("read_name", "grep_name", "list_name", "query_name")
        for field, name in zip(fields, names, strict=True):
            if not isinstance(name, str) or not name.isidentifier() or len(name) > 64:
                raise ConfigError(
                    f"{field} must be an identifier of at most 64 characters; got {name!r}",
                    field=field,
                )
        if len(set(names)) != len(names):
            raise ConfigError(f"tool names must differ; got {names}")
        if not isinstance(cross_session, bool):
            raise ConfigError("cross_session must be a bool", field="cross_session")
        self.store = store
        self.session = session
        self.max_page_bytes = max_page_bytes
        self.max_line_bytes = max_line_bytes
        self.max_column_bytes = max_column_bytes
        self.cross_session = cross_session
        self.names = ToolNames(read=read_name, grep=grep_name, list=list_name, query=query_name)
        given = {
            "read_spill": read_name,
            "grep_spill": grep_name,
            "list_spills": list_name,
            "query_spill": query_name,
        }
        self.specs: dict[str, ToolSpec] = {given[spec.default_name]: spec for spec in SPECS}
        """Each tool's registry entry, by the name the model calls it."""
        self._metas: BoundedCache[str, SpillMeta] = BoundedCache(META_CACHE_SIZE)
        self._queries: QueryWorker | None = None  # started by the first query

    def __repr__(self) -> str:
        return f"SpillTools({self.store!r}, session={self.session!r})"

    # ----------------------------------------------------------------- schemas

    def schemas(self, shape: Literal["openai", "anthropic"] = "openai") -> list[dict[str, Any]]:
        """Return the tools' JSON schemas for function calling.

        Args:
            shape: ``"openai"`` (``{"type": "function", "function": {...}}``) or
                ``"anthropic"`` (``{"name", "description", "input_schema"}``).

        Raises:
            ConfigError: an unknown shape.
        """
        if shape not in SCHEMA_SHAPES:
            raise ConfigError(f"shape must be 'openai' or 'anthropic'; got {shape!r}")
        out: list[dict[str, Any]] = []
        for name, spec in self.specs.items():
            description = spec.description
            schema = json.loads(json.dumps(parameters(spec.args)))
            if shape == "openai":
                out.append(
                    {
                        "type": "function",
                        "function": {
                            "name": name,
                            "description": description,
                            "parameters": schema,
                        },
                    }
                )
            else:
                out.append({"name": name, "description": description, "input_schema": schema})
        return out

    # ----------------------------------------------------------------- dispatch

    def call(self, name: str, arguments: Mapping[str, Any] | str | None = None) -> ToolResult:
        """Run the tool called ``name`` with raw model arguments (a dict or a JSON string).

        Invalid arguments come back as a short error result naming the problem, never as
        an exception.
        """
        spec = self.specs.get(name) if isinstance(name, str) else None
        if spec is None:
            known = ", ".join(self.specs)
            return self._error(f"unknown tool {quote(str(name), 60)}; the spill tools are {known}")
        raw: Any = {} if arguments is None else arguments
        if isinstance(raw, str | bytes):
            try:
                raw = json.loads(raw)
            except ValueError:
                return self._error(f"the arguments of {name} are not valid JSON")
        if not isinstance(raw, Mapping):
            return self._error(f"the arguments of {name} must be a JSON object")
        return self._invoke(spec.args, name, dict(raw))

    acall = method_twin(call)

    def _invoke(self, model: type[ToolArgs], name: str, raw: dict[str, Any]) -> ToolResult:
        """Validate ``raw`` against ``model`` and run the tool (bad arguments: an error result)."""
        try:
            args = model.model_validate(raw)
        except ValidationError as exc:
            return self._error(describe_validation(name, exc))
        return self._run(args)

    def _run(self, args: ToolArgs) -> ToolResult:
        try:
            text = self._page(args)
        except RequestRefused as exc:
            return self._error(str(exc))
        except SpillstoreError as exc:
            return self._error(explain(exc, self.names))
        except Exception as exc:  # the model must never see a traceback
            log.warning("spillstore: %s failed", type(args).__name__, exc_info=True)
            return self._error(
                f"internal error ({type(exc).__name__}) while running the spill tool; "
                "the spill store may be unavailable"
            )
        return result(bounded(text, self.max_page_bytes))

    def _page(self, args: ToolArgs) -> str:
        """The text of the page ``args`` asks for (errors the model should see raise)."""
        # Each tool's modules load on its first call: an MCP proxy lists the tools at
        # start, on its client's path, and needs none of them for that.
        if isinstance(args, ReadArgs):
            from spillstore._tools.read import read_page  # noqa: PLC0415

            return read_page(self, self._meta(args.spill, cached=True), args)
        if isinstance(args, GrepArgs):
            from spillstore._tools.grep import Search  # noqa: PLC0415
            from spillstore._tools.regex import compile_pattern  # noqa: PLC0415

            matcher = compile_pattern(
                args.pattern, ignore_case=args.ignore_case, literal=args.literal
            )
            if args.spill is None:
                metas = self.store.list(self.session)
            else:
                metas = [self._meta(args.spill)]
            return Search(self, args, matcher, metas).run()
        if isinstance(args, QueryArgs):
            from spillstore._tools.query import query_page  # noqa: PLC0415
            from spillstore._tools.query_worker import QueryWorker  # noqa: PLC0415

            # Not the cached metadata: the worker may hold the document, so this stat is
            # what notices a spill deleted or expired since.
            with _STARTING:  # one worker per SpillTools, even if two threads query first
                if self._queries is None:
                    self._queries = QueryWorker()
            return query_page(self, self._queries, self._meta(args.spill), args)
        assert isinstance(args, ListArgs)
        from spillstore._tools.list import list_page  # noqa: PLC0415

        return list_page(self, args)

    def _error(self, message: str) -> ToolResult:
        return result(bounded(message, self.max_page_bytes), is_error=True)

    # ----------------------------------------------------------------- typed shells

    def read(
        self,
        spill: str,
        offset: int = 1,
        limit: int = DEFAULT_READ_LIMIT,
        byte_offset: int | None = None,
        max_bytes: int | None = None,
    ) -> ToolResult:
        """Read a page of a spill (see :mod:`~spillstore._tools.read` for the format).

        Args:
            spill: a spill id, or the path of a spill file in the store.
            offset: first line, 1-based; negative counts from the end (-1: last line).
            limit: lines to show (1 to 2000).
            byte_offset: read by bytes from this offset instead (for huge lines).
            max_bytes: bytes to show in byte mode (default 4096); a cap on the bytes of
                lines in line mode.

        Returns:
            A spill-exempt result; ``is_error`` for requests the model should fix.
        """
        return self._invoke(ReadArgs, self.names.read, _arguments(ReadArgs, locals()))

    aread = method_twin(read)

    def grep(
        self,
        pattern: str,
        spill: str | None = None,
        *,
        ignore_case: bool = False,
        context: int = 0,
        before: int | None = None,
        after: int | None = None,
        output_mode: Literal["content", "spills", "count"] = "content",
        head_limit: int | None = DEFAULT_HEAD_LIMIT,
        offset: int = 0,
        literal: bool = False,
    ) -> ToolResult:
        """Search one spill, or every spill of the session.

        Args:
            pattern: an RE2 regex (``^``/``$`` match at line ends), or a literal.
            spill: one spill id or path; None searches the whole session.
            ignore_case: match case-insensitively.
            context, before, after: context lines around each matching line.
            output_mode: ``"content"`` (matching lines), ``"spills"`` (spills with a
                match) or ``"count"`` (matching lines per spill).
            head_limit: results per page; 0 or None: unlimited (still page-bounded).
            offset: results to skip (paging).
            literal: the pattern is a literal string.
        """
        return self._invoke(GrepArgs, self.names.grep, _arguments(GrepArgs, locals()))

    agrep = method_twin(grep)

    def list(
        self, session: str | None = None, *, offset: int = 0, limit: int = DEFAULT_LIST_LIMIT
    ) -> ToolResult:
        """List the spills of ``session`` (default: this session), newest last.

        Args:
            session: the session; another one than the tools' needs ``cross_session``.
            offset: skip this many of the newest spills (to page back).
            limit: spills to show.
        """
        return self._invoke(ListArgs, self.names.list, _arguments(ListArgs, locals()))

    alist = method_twin(list)

    def query(
        self,
        spill: str,
        expression: str,
        *,
        offset: int = 0,
        limit: int = DEFAULT_QUERY_LIMIT,
    ) -> ToolResult:
        """Run a jq expression over a spill that holds JSON or JSON Lines.

        Args:
            spill: a spill id, or the path of a spill file in the store.
            expression: a jq expression (JSON Lines: it runs on each line).
            offset: results to skip (paging).
            limit: results to show (1 to 1000; the page size bounds them too).

        Returns:
            A spill-exempt result: one compact JSON result per line, with its byte range
            when it is a value of the document; ``is_error`` for requests the model
            should fix (not JSON, saved in part, a bad or runaway expression).
        """
        return self._invoke(QueryArgs, self.names.query, _arguments(QueryArgs, locals()))

    aquery = method_twin(query)

    def close(self) -> None:
        """Stop the query worker process, if one runs (the next query starts another)."""
        if self._queries is not None:
            self._queries.close()

    # ----------------------------------------------------------------- resolving

    def _meta(self, spill: str, *, cached: bool = False) -> SpillMeta:
        """Return the metadata of the spill named by id or path, in an allowed session.

        With ``cached``, metadata seen before is reused (Read: it saves one sidecar
        read per page; every store read checks the spill still exists).
        """
        if "\x00" in spill:
            raise RequestRefused(
                "refused: a spill id or path never contains a NUL byte; call "
                f"{self.names.list} to see the spills"
            )
        spill_id = spill if is_spill_id(spill) else self.store.resolve(spill)
        if cached:
            meta = self._metas.get(spill_id)
            if meta is not None:
                return meta
        meta = self.store.stat(spill_id)
        if not self.cross_session and meta.session != self.session:
            raise SpillNotFound(f"no spill with id {spill_id}", spill_id=spill_id)
        if meta.total_bytes:
            # Ids are content-derived, so a spill's metadata never changes; an expired
            # spill is still noticed, by the read that follows (it stats again).
            self._metas.put(spill_id, meta)
        return meta


def _arguments(model: type[ToolArgs], given: Mapping[str, Any]) -> dict[str, Any]:
    """The model's fields picked from a typed shell's ``locals()``, as a model would send them.

    The shells' signatures restate the fields for their users (a test holds them to the
    model); the fields themselves are read here, from the model, and nowhere else.
    """
    return {field: given[field] for field in _field_names(model)}


@functools.cache
def _field_names(model: type[ToolArgs]) -> tuple[str, ...]:
    return tuple(model.model_fields)


# --------------------------------------------------------------------------- delegation


def delegate_read(
    store: Store,
    path: str,
    *,
    session: str | None = None,
    max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES,
    **read_args: Any,
) -> ToolResult | None:
    """Serve a host's own Read tool for spill files; None for any other path.

    A host whose Read tool takes a path calls this first: when ``path`` is a spill data
    file of ``store`` (:meth:`Store.is_spill_path`, symlinks resolved, prefix siblings
    refused) the page comes back as a spill-exempt result (so it never spills again);
    otherwise None is returned and the host goes on with its own logic.

    Args:
        store: the spill store.
        path: the path the model asked to read.
        session: confine to this session (default: any session of the store).
        max_page_bytes: the page cap.
        read_args: ``offset``, ``limit``, ``byte_offset``, ``max_bytes`` as for Read.
    """
    if not isinstance(path, str) or not store.is_spill_path(path):
        return None
    if session is None:
        tools = SpillTools(store, max_page_bytes=max_page_bytes, cross_session=True)
    else:
        tools = SpillTools(store, session=session, max_page_bytes=max_page_bytes)
    return tools.call(tools.names.read, {"spill": path, **read_args})
