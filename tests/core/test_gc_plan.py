"""The gc plan: which spills go, in which order, and why."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from spillstore._core.gc_plan import GcCandidate, plan_gc

candidates = st.lists(
    st.builds(
        GcCandidate,
        spill_id=st.text("abc", min_size=1, max_size=6),
        session=st.just("s"),
        created_at=st.integers(0, 1000).map(float),
        stored_bytes=st.integers(0, 100),
    ),
    max_size=30,
    unique_by=lambda c: c.spill_id,
)


@given(
    cands=candidates,
    max_age=st.one_of(st.none(), st.integers(0, 1000)),
    max_total=st.one_of(st.none(), st.integers(0, 2000)),
    max_files=st.one_of(st.none(), st.integers(0, 30)),
    grace=st.integers(0, 500),
)
def test_gc_plan_properties(
    cands: list[GcCandidate],
    max_age: int | None,
    max_total: int | None,
    max_files: int | None,
    grace: int,
) -> None:
    """gc never takes young spills, goes oldest first, and stops once within limits."""
    now = 1000.0
    plan = plan_gc(
        cands, now=now, max_age=max_age, max_total_bytes=max_total, max_files=max_files,
        grace=grace,
    )  # fmt: skip
    chosen = [c for c, _ in plan]
    assert all(now - c.created_at >= grace for c in chosen)
    keys = [(c.created_at, c.spill_id) for c in chosen]
    assert keys == sorted(keys)
    left = [c for c in cands if c not in chosen]
    eligible_left = [c for c in left if now - c.created_at >= grace]
    if max_age is not None:
        assert all(now - c.created_at <= max_age for c in eligible_left)
    if max_files is not None and len(left) > max_files:
        assert not eligible_left
    if max_total is not None and sum(c.stored_bytes for c in left) > max_total:
        assert not eligible_left
    for c, reason in plan:
        if reason in ("total_bytes", "max_files"):
            # Only removed because it was the oldest left outside the grace period.
            assert all((o.created_at, o.spill_id) > (c.created_at, c.spill_id) or o in chosen
                       for o in cands if now - o.created_at >= grace)  # fmt: skip
