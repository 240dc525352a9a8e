"""One case per entry point: run it, then check every fact the model was told.

Each ``run_*`` takes plain values (so a known defect's reproduction calls it with fixed
inputs) and raises ``AssertionError`` naming the first fact that is not true.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Sequence

from spillstore import (
    EmbeddedText,
    MediaPart,
    Part,
    ResourceLink,
    Settings,
    TextPart,
    ToolResult,
    TruncationService,
)
from tests.oracle.facts import (
    BLOB_NOTICE,
    CLOSING,
    check_blob_notices,
    check_spilled,
    check_strict_utf8,
    text_size,
)
from tests.oracle.harness import FailingStore, finish, output_file, service_for, stream, truncate
from tests.oracle.model import Truth, clean, model_encode, shown
from tests.oracle.strategies import NEEDLE, StoreChoice


def _truth(data: bytes, config: Settings) -> Truth:
    return Truth(data, config.retention_bytes, config.retained_tail_bytes)


def _suffix_size(suffix: str | None) -> int:
    return len(model_encode(suffix)) + 1 if suffix else 0


def run_text(
    config: Settings,
    text: str,
    store: StoreChoice,
    *,
    use_async: bool = False,
    suffix: str | None = None,
    page_bytes: int = 16_000,
    context: int = 0,
    byte_page: int | None = None,
) -> None:
    """A str output through ``truncate_for_model`` (or its async twin)."""
    service = service_for(store, config)
    original = ToolResult(content=(TextPart(text),), suffix=suffix)
    result = truncate(service, original, use_async=use_async)
    truth = _truth(model_encode(text), config)
    if truth.total > config.max_bytes:
        assert result.spill is not None, "an output over the budget was not cut"
    if result.spill is None:
        _check_not_cut(service, result, truth, suffix)
        if not suffix:
            _check_fits_as_given(result, original)
        return
    case = finish(
        service,
        result,
        truth,
        suffix=suffix,
        page_bytes=page_bytes,
        needle=NEEDLE,
        context=context,
        byte_page=byte_page,
    )
    check_spilled(case)


SUFFIX_SPILL = re.compile(r"the whole suffix is saved as spill (\S+):")


def _check_fits_as_given(result: ToolResult, original: ToolResult) -> None:
    """A result that fits (blobs included) comes back as the same object; one whose texts
    hold a lone surrogate comes back with each as U+FFFD (design 0b: the model's text is
    strict UTF-8 in every mode), every other part and field as given."""
    texts = [getattr(part, "text", None) for part in original.content]
    if all(text is None or clean(text) == text for text in texts):
        assert result is original, "a result that fits must come back as the same object"
        return
    check_strict_utf8(result)
    assert len(result.content) == len(original.content)
    for got, given, text in zip(result.content, original.content, texts, strict=True):
        if text is None:
            assert got is given, "a part beside the text changed"
        else:
            assert type(got) is type(given) and got.text == clean(text)  # type: ignore[attr-defined]
    assert (result.is_error, result.metadata, result.spill) == (
        original.is_error, original.metadata, None
    )  # fmt: skip


def _check_not_cut(
    service: TruncationService, result: ToolResult, truth: Truth, suffix: str | None
) -> None:
    """A result whose text was not cut: the text fits, the model text is within the
    budget, and a suffix too long to show with it is shown by its ends and saved whole
    as a spill of its own (or said not saved, on a dead store)."""
    budget = service.settings.max_bytes
    assert truth.total <= budget, "an output over the budget was not cut"
    assert text_size(result) <= budget, "model text over budget"
    if not suffix or truth.total + _suffix_size(suffix) <= budget:
        return
    check_strict_utf8(result)
    view = result.content[-1].text  # type: ignore[union-attr]
    found = SUFFIX_SPILL.search(view)
    if found is None:
        assert "the whole suffix could not be saved" in view, view[-300:]
        assert isinstance(service.store, FailingStore) and service.store.failed
        return
    meta = service.store.stat(found[1])
    saved = service.store.read_bytes(found[1], 0, meta.total_bytes)
    assert saved == model_encode(suffix), "the suffix spill does not hold the whole suffix"


def run_stream(
    config: Settings,
    chunks: Sequence[bytes | str],
    store: StoreChoice,
    *,
    use_async: bool = False,
    suffix: str | None = None,
    is_error: bool = False,
    page_bytes: int = 16_000,
    context: int = 0,
) -> None:
    """Chunks through the accumulator, finished with ``ok`` or ``error``."""
    raw = b"".join(model_encode(c) if isinstance(c, str) else c for c in chunks)
    service = service_for(store, config)
    result = stream(service, chunks, suffix=suffix, is_error=is_error, use_async=use_async)
    assert result.is_error == is_error
    truth = _truth(raw, config)
    check_strict_utf8(result)
    if result.spill is None:
        assert truth.total <= config.max_bytes, "an output over the budget was not cut"
        assert text_size(result) <= config.max_bytes
        assert result.content[0].text == shown(raw)  # type: ignore[union-attr]
        return
    case = finish(
        service,
        result,
        truth,
        suffix=suffix,
        page_bytes=page_bytes,
        needle=NEEDLE,
        context=context,
        byte_page=None,
    )
    check_spilled(case)


def run_parts(
    config: Settings,
    parts: Sequence[Part],
    store: StoreChoice,
    *,
    use_async: bool = False,
    suffix: str | None = None,
    exempt: bool = False,
    is_error: bool = False,
    page_bytes: int = 16_000,
) -> None:
    """A result with several parts: text, embedded text, media, blobs, links."""
    original = ToolResult(
        content=tuple(parts),
        suffix=suffix,
        spill_exempt=exempt,
        is_error=is_error,
        metadata={"k": 1},
    )
    service = service_for(store, config)
    result = truncate(service, original, use_async=use_async)
    if exempt:
        assert result is original, "a spill-exempt result must pass through as itself"
        return
    assert (result.is_error, result.metadata) == (original.is_error, original.metadata)
    texts_in = [p.text for p in parts if isinstance(p, TextPart | EmbeddedText)]
    truth = _truth(b"\n".join(model_encode(t) for t in texts_in), config)
    blobs = [p for p in parts if isinstance(p, MediaPart) and p.kind == "blob"]
    if result.spill is None:
        assert truth.total <= config.max_bytes, "an output over the budget was not cut"
        if suffix or result is not original:
            assert text_size(result) <= config.max_bytes, "model text over budget (notices)"
        attached = [p for p in result.content if any(p is blob for blob in blobs)]
        if blobs and len(attached) < len(blobs):  # over by its blobs: they were saved
            _check_text_kept(service, result, parts, blobs)
        elif not suffix:
            _check_fits_as_given(result, original)
        return
    assert text_size(result) <= config.max_bytes, "model text over budget (notices)"
    others = [p for p in result.content if not isinstance(p, TextPart)]
    attached = [p for p in parts if isinstance(p, MediaPart | ResourceLink) and p not in blobs]
    assert others == attached, "media parts must stay attached, in order"
    case = finish(
        service,
        result,
        truth,
        suffix=suffix,
        page_bytes=page_bytes,
        needle=NEEDLE,
        context=0,
        byte_page=None,
        blobs=tuple((b.mime_type, _decoded(b.data)) for b in blobs),
    )
    check_spilled(case)


def _check_text_kept(
    service: TruncationService, result: ToolResult, parts: Sequence[Part], blobs: list[MediaPart]
) -> None:
    """Over the budget by its blobs alone: the other parts stay, in order, each blob is
    a spill named by a notice, and no text spill claims the text was too large."""
    check_strict_utf8(result)
    kept = [p for p in parts if p not in blobs]
    texts = [p for p in result.content if not _is_notice(getattr(p, "text", ""))]
    assert len(texts) >= len(kept), "a part of the result is missing"
    for was, now in zip(kept, texts, strict=False):
        if isinstance(was, TextPart | EmbeddedText):
            assert type(now) is type(was) and now.text == clean(was.text), "a text part changed"
        else:
            assert now is was, "media parts must stay attached, in order"
    failed = isinstance(service.store, FailingStore) and service.store.failed
    tools = None if failed else service.spill_tools()
    decoded = tuple((b.mime_type, _decoded(b.data)) for b in blobs)
    check_blob_notices(result, decoded, tools, store_failed=failed)


def _is_notice(text: str) -> bool:
    return bool(BLOB_NOTICE.fullmatch(text) or CLOSING.fullmatch(text))


def _decoded(data: bytes | str) -> bytes:
    """A blob's bytes: base64 text decoded, raw bytes as they are."""
    return base64.b64decode(data, validate=True) if isinstance(data, str) else data


def run_file(
    config: Settings,
    raw: bytes,
    store: StoreChoice,
    *,
    use_async: bool = False,
    suffix: str | None = None,
    page_bytes: int = 16_000,
) -> None:
    """An output handed over as a file (``full_output_path``)."""
    path = output_file(raw)
    try:
        original = ToolResult(content=(), suffix=suffix, full_output_path=path)
        service = service_for(store, config)
        result = truncate(service, original, use_async=use_async)
    finally:
        os.unlink(path)
    truth = _truth(raw, config)
    check_strict_utf8(result)
    if truth.total > config.max_bytes:
        assert result.spill is not None, "a file over the budget got no preview"
    if result.spill is None:
        _check_not_cut(service, result, truth, suffix)
        return
    case = finish(
        service,
        result,
        truth,
        suffix=suffix,
        page_bytes=page_bytes,
        needle=NEEDLE,
        context=1,
        byte_page=None,
    )
    check_spilled(case)
