"""The capper: one tool's results through the service, in the shape the tool gave them.

A :class:`Capper` holds a service (made on first use) and one tool's overrides (its own
budget, or exempt). It caps a :class:`~spillstore.ToolResult` (:meth:`Capper.cap`), a
tool's return value in its own shape (:meth:`Capper.value_flow`, see
:mod:`spillstore._service.wrap`), or a framework's content list (:meth:`Capper.items_flow`). The
shapes are written once, as flows (:mod:`spillstore._service.flow`) that yield the one
cap they need; :func:`~spillstore._service.flow.drive` and
:func:`~spillstore._service.flow.adrive` run them, so every sync/async pair differs
only by ``await``. :func:`spillstore.wrap` and the framework adapters share it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, cast

from spillstore._content import EmbeddedText, MediaPart, Part, ResourceLink, TextPart, ToolResult
from spillstore._errors import ConfigError
from spillstore._service.decide import result_flow
from spillstore._service.flow import Flow, adrive, drive
from spillstore._service.service import TruncationService
from spillstore._settings import MIN_BUDGET_BYTES, Settings, fit_previews, parse_size

__all__ = ["Capper", "json_text", "model_text", "to_result"]

_PART_TYPES: Final = (str, TextPart, MediaPart, EmbeddedText, ResourceLink)
_KEPT_MIME: Final = "application/x-spillstore-kept"
"""MIME type of the stand-ins for a framework's non-text items while a result is capped."""


def _budget_settings(base: Settings, max_bytes: int) -> Settings:
    """``base`` with another inline budget; previews shrink (4:1) when they no longer fit."""
    head_bytes, tail_bytes = fit_previews(max_bytes, base.head_bytes, base.tail_bytes)
    values = base.model_dump()
    values.update(max_bytes=max_bytes, head_bytes=head_bytes, tail_bytes=tail_bytes)
    return Settings(**values)


def _check_budget(max_bytes: object) -> int | None:
    if max_bytes is None:
        return None
    size = parse_size(max_bytes)
    if size < MIN_BUDGET_BYTES:
        raise ConfigError(
            f"max_bytes must be at least {MIN_BUDGET_BYTES} bytes so the pointer fits; "
            f"got {max_bytes!r}",
            field="max_bytes",
        )
    return size


class Capper:
    """Caps one tool's results: a service (made on first use) and the per-tool overrides.

    Args:
        service: the service results go through; by default ``TruncationService()``
            (settings from the environment), made on the first result.
        max_bytes: this tool's inline budget instead of the service's (an int or a
            human size such as ``"20KB"``); previews shrink to fit a smaller budget.
        exempt: pass every result through untouched (a tool that pages spills itself).

    Raises:
        ConfigError: ``max_bytes`` is not a size of at least 2,048 bytes, or
            ``service`` is not a :class:`~spillstore.TruncationService`.
    """

    def __init__(
        self,
        service: TruncationService | None = None,
        *,
        max_bytes: int | str | None = None,
        exempt: bool = False,
    ) -> None:
        if service is not None and not isinstance(service, TruncationService):
            raise ConfigError(
                f"service must be a spillstore TruncationService; got {type(service).__name__}"
            )
        if not isinstance(exempt, bool):
            raise ConfigError(f"exempt must be a bool; got {exempt!r}", field="exempt")
        self.max_bytes = _check_budget(max_bytes)
        self.exempt = exempt
        self._service = service
        self._lock = threading.Lock()

    @property
    def service(self) -> TruncationService:
        """The service with this tool's budget (made and cached on first use)."""
        service = self._service
        if service is not None and (
            self.max_bytes is None or service.settings.max_bytes == self.max_bytes
        ):
            return service
        with self._lock:
            service = self._service
            if service is None:
                service = TruncationService()
            if self.max_bytes is not None and service.settings.max_bytes != self.max_bytes:
                service = TruncationService(
                    service.store,
                    _budget_settings(service.settings, self.max_bytes),
                    session=service.session,
                    read_tool=service.read_tool,
                    grep_tool=service.grep_tool,
                    query_tool=service.query_tool,
                    deliverable_media=service.deliverable_media,
                )
            self._service = service
            return service

    def cap_flow(
        self, result: ToolResult | str, *, tool_name: str, tool_call_id: str
    ) -> Flow[ToolResult]:
        """Cap ``result`` inside a flow: the service's own decision flow, run by the
        caller's driver (the same object comes back when it fits or is exempt)."""
        if self.exempt:
            return result if isinstance(result, ToolResult) else _as_result(result)
        return (yield from result_flow(self.service, result, tool_name, tool_call_id))

    def value_flow(self, value: Any, *, tool_name: str, tool_call_id: str) -> Flow[Any]:
        """Cap a tool's return value and give it back in its own shape (see :func:`to_result`)."""
        shaped = to_result(value)
        if shaped is None:
            text = json_text(value)
            if text is None:
                return value
            return (
                yield from self.text_flow(
                    value, text, tool_name=tool_name, tool_call_id=tool_call_id
                )
            )
        result, rebuild = shaped
        capped = yield from self.cap_flow(result, tool_name=tool_name, tool_call_id=tool_call_id)
        return value if capped is result else rebuild(capped)

    def text_flow(self, value: Any, text: str, *, tool_name: str, tool_call_id: str) -> Flow[Any]:
        """Cap ``value`` as ``text``, what a framework sends for it: the value itself when
        that fits, else the pointer (a ``str``)."""
        capped = yield from self.value_flow(text, tool_name=tool_name, tool_call_id=tool_call_id)
        return value if capped is text else capped

    def items_flow(
        self,
        items: Sequence[Any],
        *,
        text_of: Callable[[Any], str | None],
        make_text: Callable[[str], Any],
        tool_name: str,
        tool_call_id: str,
    ) -> Flow[list[Any] | None]:
        """Cap a framework's content list: text items are the output, the others stay.

        Args:
            items: the framework's content items, in order.
            text_of: an item's text, or ``None`` for an item kept as it is (an image).
            make_text: a framework text item from model-facing text.

        Returns:
            The capped list (the pointer, then the kept items in order), or ``None``
            when the items fit (use them as they are).
        """
        result, kept = _items_result(items, text_of)
        capped = yield from self.cap_flow(result, tool_name=tool_name, tool_call_id=tool_call_id)
        return None if capped is result else _items_back(capped, kept, make_text)

    def cap_value(self, value: Any, *, tool_name: str, tool_call_id: str) -> Any:
        """Run :meth:`value_flow`: a return value capped in its own shape."""
        return drive(self.value_flow(value, tool_name=tool_name, tool_call_id=tool_call_id))

    async def acap_value(self, value: Any, *, tool_name: str, tool_call_id: str) -> Any:
        """Async twin of :meth:`cap_value`."""
        return await adrive(self.value_flow(value, tool_name=tool_name, tool_call_id=tool_call_id))


def _items_result(
    items: Sequence[Any], text_of: Callable[[Any], str | None]
) -> tuple[ToolResult, dict[int, Any]]:
    """A content list as a result; non-text items become stand-ins (kept by identity)."""
    parts: list[Part] = []
    kept: dict[int, Any] = {}
    for item in items:
        text = text_of(item)
        if text is not None:
            parts.append(TextPart(text))
            continue
        stand_in = MediaPart(kind="image", mime_type=_KEPT_MIME, data=b"")
        kept[id(stand_in)] = item
        parts.append(stand_in)
    return ToolResult(content=tuple(parts)), kept


def _items_back(
    capped: ToolResult, kept: Mapping[int, Any], make_text: Callable[[str], Any]
) -> list[Any]:
    out: list[Any] = []
    for part in capped.content:
        if isinstance(part, TextPart | EmbeddedText):
            out.append(make_text(part.text))
        elif id(part) in kept:
            out.append(kept[id(part)])
    return out


def _as_result(text: str) -> ToolResult:
    return ToolResult(content=(TextPart(text),))


def model_text(result: ToolResult) -> str:
    """The text the model reads in ``result``: its text parts joined with newlines."""
    return "\n".join(p.text for p in result.content if isinstance(p, TextPart | EmbeddedText))


def to_result(value: Any) -> tuple[ToolResult, Callable[[ToolResult], Any]] | None:
    """A tool's return value as a :class:`ToolResult`, and how to give a capped one back.

    Returns ``None`` for values left alone (the table in :mod:`spillstore._service.wrap`
    lists the shapes).
    """
    if isinstance(value, ToolResult):
        return value, _same
    if isinstance(value, str):
        return _as_result(value), model_text
    if isinstance(value, Mapping):
        text = value.get("text")
        if not isinstance(text, str):
            return None
        mapping = cast("Mapping[str, Any]", value)
        return _as_result(text), lambda capped: {**mapping, "text": model_text(capped)}
    if isinstance(value, list | tuple) and value:
        items = cast("Sequence[object]", value)
        if all(isinstance(item, str) for item in items):
            parts: tuple[Part, ...] = tuple(TextPart(cast("str", item)) for item in items)
            return ToolResult(content=parts), _texts
        if all(isinstance(item, _PART_TYPES) for item in items):
            parts = tuple(
                TextPart(item) if isinstance(item, str) else cast("Part", item) for item in items
            )
            return ToolResult(content=parts), _parts
    return None


def json_text(value: Any) -> str | None:
    """The JSON text of a dict, list or tuple (what a host sends the model for it), or
    ``None`` for any other value, or one JSON cannot write (a set inside, a cycle)."""
    if not isinstance(value, Mapping | list | tuple):
        return None
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return None


def _same(capped: ToolResult) -> ToolResult:
    return capped


def _texts(capped: ToolResult) -> list[str]:
    return [p.text for p in capped.content if isinstance(p, TextPart | EmbeddedText)]


def _parts(capped: ToolResult) -> list[Part]:
    return list(capped.content)
