"""TruncationService: the one decision point every tool result passes through.

The decisions are made once, in one flow (:func:`~spillstore._service.decide.result_flow`),
and driven by two thin shells: :meth:`~TruncationService.truncate_for_model` runs its
store calls in place, :meth:`~TruncationService.atruncate_for_model` awaits them. The
flow, in order (design.md §2):

1. a spill-exempt result comes back as the same object;
2. a result whose text (and suffix) fits the budget comes back as the same object;
3. lines longer than ``max_line_bytes`` are cut, and if that alone brings the text within
   budget the shaped text is kept and a short pointer is appended ("append mode");
4. otherwise the text is replaced by a pointer with head and tail previews ("replace");
5. the full output (up to the retention cap) is persisted *before* rendering, and if
   persisting fails the model still gets a bounded preview that says it was not saved;
6. media stay attached in order; parts that cannot be delivered leave a visible notice;
7. ``is_error``, metadata and structured content are kept;
8. the suffix goes after the pointer, never cut off by the cap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spillstore._content import ToolResult
from spillstore._service.accumulator import OutputAccumulator
from spillstore._service.decide import result_flow
from spillstore._service.flow import adrive, drive
from spillstore._settings import Settings

if TYPE_CHECKING:
    from spillstore._stores.base import Store
    from spillstore._tools.spill_tools import SpillTools

__all__ = ["DEFAULT_DELIVERABLE", "TruncationService"]

DEFAULT_DELIVERABLE = frozenset({"image", "audio"})
"""Media kinds a model can take; others (blobs) count in the budget and, when a result is
cut, are saved as spills of their own, a notice naming each."""


class TruncationService:
    """Caps tool results for the model, spilling what does not fit to a store.

    Args:
        store: where spills go; by default a :class:`~spillstore.LocalStore` at
            ``settings.dir`` (or the user cache dir).
        settings: budgets and caps; by default ``Settings()`` (environment, then defaults).
        session: the store session spills go to; by default ``settings.session``.
        read_tool, grep_tool: tool names used in the ready-to-call hints.
        deliverable_media: media kinds passed to the model; other kinds (blobs) count in
            the budget and, when the result is cut, are saved as spills of their own,
            with a notice naming each.
    """

    def __init__(
        self,
        store: Store | None = None,
        settings: Settings | None = None,
        *,
        session: str | None = None,
        read_tool: str = "read_spill",
        grep_tool: str = "grep_spill",
        deliverable_media: frozenset[str] = DEFAULT_DELIVERABLE,
    ) -> None:
        self.settings = settings if settings is not None else Settings()
        if store is None:
            from spillstore._stores.local import LocalStore  # noqa: PLC0415 - only when needed

            store = LocalStore(self.settings.dir)
        self.store = store
        self.session = session if session is not None else self.settings.session
        self.read_tool = read_tool
        self.grep_tool = grep_tool
        self.deliverable_media = deliverable_media

    def truncate_for_model(
        self, result: ToolResult | str, *, tool_name: str, tool_call_id: str
    ) -> ToolResult:
        """Return what the model should see of ``result``: itself when it fits.

        Never raises because the store failed: if it did (disk full, a dead backend),
        the returned preview says the output was not saved. A plain ``str`` is wrapped
        in a :class:`ToolResult`.

        A result with ``full_output_path`` names a file that holds the whole output (a
        shell's log): the file is the output, its text parts are not measured, and an
        oversized file is adopted by the store without a second copy.
        """
        return drive(result_flow(self, result, tool_name, tool_call_id))

    async def atruncate_for_model(
        self, result: ToolResult | str, *, tool_name: str, tool_call_id: str
    ) -> ToolResult:
        """Async twin of :meth:`truncate_for_model`: the same flow, its I/O awaited."""
        return await adrive(result_flow(self, result, tool_name, tool_call_id))

    def accumulator(self, *, tool_name: str, tool_call_id: str) -> OutputAccumulator:
        """Start streaming one tool's output through the service with bounded memory."""
        return OutputAccumulator(self, tool_name=tool_name, tool_call_id=tool_call_id)

    def spill_tools(self, **options: Any) -> SpillTools:
        """Read, Grep and List over this service's store and session.

        Their names match the ones the pointer's hints call (``read_tool``,
        ``grep_tool``), so a model can follow a hint verbatim. ``options`` go to
        :class:`~spillstore.SpillTools` (``max_page_bytes``, ``list_name``, ...).
        """
        from spillstore._tools.spill_tools import SpillTools  # noqa: PLC0415 - re2 loads on demand

        options.setdefault("read_name", self.read_tool)
        options.setdefault("grep_name", self.grep_tool)
        return SpillTools(self.store, session=self.session, **options)
