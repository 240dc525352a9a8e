"""Benchmark the recovery tools against GNU grep, side by side in one run.

Run:  .venv/bin/python benchmarks/bench_tools.py [--quick] [--no-record] [--dir DIR]

On the same 100 MiB log-like output, stored in a LocalStore (retention off) and as a
plain file, timed in interleaved rounds (median of each, ratio = tool / grep):

  (1) grep_spill on a rare literal         vs  grep -n LITERAL        target <= 1.0x
  (2) grep_spill on a rare regex           vs  grep -nE REGEX         target <= 1.0x
      (and one regex with no literal prefix, reported without a target)
  (3) grep_spill on a common word, default head_limit (100)
                                           vs  grep -n WORD (all output drained)
                                                                      target <= 1.0x
      (also shown: grep -n -m 100, which stops early like head_limit does)
  (4) every match of the common word (~35,000 lines), head_limit=0 (unlimited) and a
      page cap large enough to hold them all
                                           vs  grep -n WORD           target <= 1.5x
      (also shown, the floor Python cannot pass: the two C loops every listing needs,
      the search for every hit alone, and one ``bytes.count`` of every newline alone;
      and the whole listing as lean as its C calls allow, on the bytes in memory)
  (5) output_mode="count" on the common word  vs  grep -c WORD        target <= 1.0x
      (and on the rare literal, reported without a target)

Then (6) the ReDoS corpus over 100 KB, each <= 50 ms, and (7) read_spill at line
5,000,001 of a 1 GiB spill, median <= 200 us (the page holds as many lines as the
16,000-byte cap allows). grep's output goes to a pipe this process drains (GNU grep
stops early when its output is /dev/null, which would not be a fair baseline).

The figures are written to the "## Recovery tools (issue 5)" section of
benchmarks/RESULTS.md (that section only is replaced; other sections are kept).

``--only session [--spills N] [--session-dir DIR]`` (issue 14, not recorded): a
session-wide grep over N spills of ~17 KB (default 10,000, written through ``put`` into
DIR/files and DIR/catalog, kept there for the next run) against ``grep -rn`` over the
same data files, in wall and CPU time; with the store's ``list`` alone and the
Python floor (open, fstat, read and one RE2 search per data file) beside it.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from itertools import accumulate, chain, repeat
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._timing import fmt, machine  # noqa: E402
from spillstore import LocalStore, SpillTools, Store  # noqa: E402
from spillstore._tools.regex import compile_pattern  # noqa: E402

MIB = 1 << 20
GIB = 1 << 30
RARE = "NEEDLE-7f3a9c"
RARE_REGEX = r"NEEDLE-[0-9a-f]+ conn"
NO_PREFIX_REGEX = r"[0-9]+ ms NEEDLE"
WORD = "timeout"
SESSION = "bench"
HEADING = "## Recovery tools (issue 5)"


def log_data(size: int, word_every: int = 45, seed: int = 7) -> bytes:
    """A log-like output of ``size`` bytes: ~1/45 of lines hold WORD, one holds RARE."""
    import random

    rnd = random.Random(seed)
    levels = [b"INFO", b"DEBUG", b"WARN", b"INFO", b"INFO", b"DEBUG"]
    parts = [b"http.server", b"db.pool", b"scheduler", b"cache", b"auth", b"worker.%d"]
    messages = [
        b"request handled in %d ms",
        b"connection opened id=%d",
        b"job %d queued",
        b"cache miss key=user:%d",
        b"token refreshed for uid %d",
        b"heartbeat seq=%d",
        b"processed batch of %d records",
        b"gc pause %d us",
    ]
    pool = []
    for k in range(8192):
        part = rnd.choice(parts)
        if b"%d" in part:
            part = part % rnd.randrange(16)
        message = rnd.choice(messages) % rnd.randrange(100_000)
        if k % word_every == 0:
            message += b" after " + WORD.encode()
        pool.append(
            b"2026-11-29T12:%02d:%02d.%03dZ %s [%s] %s\n"
            % (
                rnd.randrange(60),
                rnd.randrange(60),
                rnd.randrange(1000),
                rnd.choice(levels),
                part,
                message,
            )
        )
    block = b"".join(pool)
    data = bytearray(block * (size // len(block) + 1))
    del data[size:]
    at = data.rfind(b"\n", 0, len(data) * 3 // 5) + 1
    data[at:at] = b"ERROR [db.pool] " + RARE.encode() + b" connection reset by peer\n"
    del data[size:]
    data[-1:] = b"\n"
    return bytes(data)


def run_grep(*args: str) -> Callable[[], int]:
    """A baseline: GNU grep with its output drained from a pipe; returns bytes read."""

    def call() -> int:
        done = subprocess.run(["grep", *args], stdout=subprocess.PIPE, check=False)
        assert done.returncode in (0, 1), done.returncode
        return len(done.stdout)

    return call


def _floor_loops(
    data: bytes,
) -> tuple[Callable[[], int], Callable[[], int], Callable[[], int], Callable[[], int]]:
    """Case (4)'s floor: the two C loops any listing of every match with its line number
    runs, each alone: finding every hit (one RE2 call a hit; as the tool makes since
    session 5: from the literal's rarest character, the bytes before it checked; and as
    before, the whole literal) and counting every newline (one ``bytes.count``, the
    fastest count the stdlib has). And the whole listing as lean as these C calls allow
    (session 6): on the bytes in memory, 1 MiB of whole lines at a time, each hit one
    RE2 call, one ``rfind``, one ``count`` and one slice, the lines one ``%``-format:
    the tool's own steps without its store, index, paging or page text."""
    matcher = compile_pattern(WORD)
    program, anchor = matcher.to_line_end, matcher.anchor
    rare = getattr(matcher, "rare_line_end", None) or program  # (before session 5: none)
    lead = getattr(matcher, "lead", b"")
    assert program is not None and rare is not None
    size = len(lead)

    def hits(pos: int, end: int) -> tuple[list[int], list[int]]:
        """Every hit's match start and line end in ``data[pos:end]``, as the tool finds them."""
        starts: list[int] = []
        ends: list[int] = []
        while pos < end:
            start, line_end = rare(anchor, data, pos + size, end)[0]
            if start < 0:
                break
            if data[start - size : start] != lead:
                pos = start - size + 1
                continue
            starts.append(start - size)
            ends.append(line_end)
            pos = line_end + 1
        return starts, ends

    def search_all() -> int:
        return len(hits(0, len(data))[0])

    def search_whole() -> int:
        hits, pos, end = 0, 0, len(data)
        while pos < end:
            start, line_end = program(anchor, data, pos, end)[0]
            if start < 0:
                break
            hits += 1
            pos = line_end + 1
        return hits

    def count_all() -> int:
        return data.count(b"\n")

    def listing_all() -> int:
        out, newlines, pos, end = [], 0, 0, len(data)
        while pos < end:
            stop = data.rfind(b"\n", pos, min(pos + MIB, end)) + 1 if pos + MIB < end else end
            starts, ends = hits(pos, stop)
            if starts:
                found = map(data.rfind, repeat(b"\n"), repeat(pos), starts)
                line_starts = [x + 1 or pos for x in found]
                gaps = list(map(data.count, repeat(b"\n"), [pos, *ends[:-1]], line_starts))
                gaps[0] += newlines + 1
                numbers = list(accumulate(gaps))
                lines = [data[a:b] for a, b in zip(line_starts, ends, strict=True)]
                pairs = chain.from_iterable(zip(numbers, lines, strict=True))
                out.append((b"%d:%b\n" * len(lines)) % tuple(pairs))
                newlines = numbers[-1] - 1 + data.count(b"\n", ends[-1], stop)
            else:
                newlines += data.count(b"\n", pos, stop)
            pos = stop
        return len(b"".join(out).decode())

    return search_all, search_whole, count_all, listing_all


def row(name: str, wall: float, cpu: float, base: tuple[float, float], target: float | None) -> str:
    """One table row: name, median wall and CPU time, their ratios to grep's, verdict (on
    the wall ratio)."""
    ratio = wall / base[0]
    if target is None:
        verdict = "(no target)"
    else:
        verdict = "ok" if ratio <= target else f"MISSED (target {target:.1f}x)"
    return (
        f"| {name} | {fmt(wall)} | {ratio:.2f}x | {fmt(cpu)} | {cpu / base[1]:.2f}x | {verdict} |"
    )


def bench_grep(directory: Path, size: int, rounds: int, out: list[str]) -> None:
    """Sections (1)-(5): grep_spill vs GNU grep on the same bytes."""
    data = log_data(size)
    plain = directory / "plain.log"
    plain.write_bytes(data)
    store = LocalStore(directory / "store", retention_bytes=None)
    meta = store.put(data, session=SESSION, tool_name="bash", tool_call_id="bench")
    spill = meta.spill_id
    word_lines = data.count(WORD.encode())
    search_all, search_whole, count_all, listing_all = _floor_loops(data)
    assert search_all() == search_whole() == word_lines
    tools = SpillTools(store, session=SESSION)
    unlimited = SpillTools(store, session=SESSION, max_page_bytes=1 << 30)

    # Correctness first: the same hits as grep.
    expected = subprocess.run(
        ["grep", "-n", WORD, str(plain)], stdout=subprocess.PIPE, check=True
    ).stdout.decode()
    every = unlimited.grep(WORD, spill, head_limit=0)
    got = every.content[0].text.split("\n")[1:-1]  # type: ignore[union-attr]
    assert got == expected.rstrip("\n").split("\n"), "grep_spill differs from grep -n"
    assert listing_all() == len(expected), "the lean listing differs from grep -n"
    count = tools.grep(WORD, spill, output_mode="count").content[0].text  # type: ignore[union-attr]
    assert f": {len(got)} matching lines" in count
    rare = tools.grep(RARE, spill).content[0].text  # type: ignore[union-attr]
    assert RARE in rare

    file = str(plain)
    cases: list[tuple[str, dict[str, Callable[[], object]], str, float | None, list[str]]] = [
        (
            f"(1) rare literal {RARE!r}",
            {"grep": run_grep("-n", RARE, file), "tool": lambda: tools.grep(RARE, spill)},
            "grep -n",
            1.0,
            [],
        ),
        (
            f"(2) rare regex {RARE_REGEX!r}",
            {
                "grep": run_grep("-nE", RARE_REGEX, file),
                "tool": lambda: tools.grep(RARE_REGEX, spill),
            },
            "grep -nE",
            1.0,
            [],
        ),
        (
            f"(2b) rare regex without a literal prefix {NO_PREFIX_REGEX!r}",
            {
                "grep": run_grep("-nE", NO_PREFIX_REGEX, file),
                "tool": lambda: tools.grep(NO_PREFIX_REGEX, spill),
            },
            "grep -nE",
            None,
            [],
        ),
        (
            f"(3) common word {WORD!r}, default head_limit=100",
            {
                "grep": run_grep("-n", WORD, file),
                "tool": lambda: tools.grep(WORD, spill),
                "grep -m 100": run_grep("-n", "-m", "100", WORD, file),
            },
            "grep -n",
            1.0,
            ["grep -m 100"],
        ),
        (
            f"(4) all {len(got):,} matching lines of {WORD!r}, head_limit=0",
            {
                "grep": run_grep("-n", WORD, file),
                "tool": lambda: unlimited.grep(WORD, spill, head_limit=0),
                "floor: the search alone": search_all,
                "floor: the search alone, whole literal": search_whole,
                "floor: bytes.count alone": count_all,
                "floor: the whole listing, lean, bytes in memory": listing_all,
            },
            "grep -n",
            1.5,
            [
                "floor: the search alone",
                "floor: the search alone, whole literal",
                "floor: bytes.count alone",
                "floor: the whole listing, lean, bytes in memory",
            ],
        ),
        (
            f"(5) count of {WORD!r} (output_mode='count')",
            {
                "grep": run_grep("-c", WORD, file),
                "tool": lambda: tools.grep(WORD, spill, output_mode="count"),
            },
            "grep -c",
            1.0,
            [],
        ),
        (
            f"(5b) count of the rare literal {RARE!r}",
            {
                "grep": run_grep("-c", RARE, file),
                "tool": lambda: tools.grep(RARE, spill, output_mode="count"),
            },
            "grep -c",
            None,
            [],
        ),
    ]
    out.append(
        f"Spill: {size:,} bytes of log-like lines in a LocalStore (retention off), "
        f"{word_lines:,} lines with {WORD!r}; the same bytes as a plain file for grep. "
        f"{rounds} interleaved rounds, medians."
    )
    out.append("")
    out.append("| case | wall | vs grep | CPU | vs grep | verdict (wall) |")
    out.append("|---|---|---|---|---|---|")
    for title, fns, baseline, target, extras in cases:
        walls, cpus = _timed(fns, rounds)
        base = walls["grep"], cpus["grep"]
        out.append(
            row(f"{title}: `{baseline}`", *base, base, None).replace("(no target)", "baseline")
        )
        out.append(row(f"{title}: grep_spill", walls["tool"], cpus["tool"], base, target))
        for extra in extras:
            name = f"{title}: `{extra}` (for reference)"
            out.append(row(name, walls[extra], cpus[extra], base, None))
        print("\n".join(out[-2 - len(extras) :]), flush=True)
    shutil.rmtree(directory / "store")
    plain.unlink()


def bench_redos(directory: Path, out: list[str]) -> None:
    """Section (6): the ReDoS corpus over 100 KB."""
    store = LocalStore(directory / "redos")
    spill = store.put(
        b"a" * 100_000 + b"!\n", session=SESSION, tool_name="t", tool_call_id="r"
    ).spill_id
    tools = SpillTools(store, session=SESSION)
    out.append("")
    out.append("ReDoS corpus over 100,000 bytes of 'a' then '!' (content mode, 20 calls, median):")
    out.append("")
    out.append("| pattern | median | verdict (<= 50 ms) |")
    out.append("|---|---|---|")
    for pattern in ("(a+)+$", "(a|a)*b", "(a|aa)+", "(.*a){20}"):
        samples = []
        for _ in range(20):
            started = time.perf_counter()
            result = tools.grep(pattern, spill)
            samples.append(time.perf_counter() - started)
            assert not result.is_error
        median = statistics.median(samples)
        verdict = "ok" if median <= 0.050 else "MISSED"
        out.append(f"| `{pattern}` | {fmt(median)} | {verdict} |")
        print(out[-1], flush=True)


def bench_read(directory: Path, size: int, reads: int, out: list[str]) -> None:
    """Section (7): a Read page at line 5,000,001 (500,001 in quick mode)."""
    store = LocalStore(directory / "read", retention_bytes=None)
    first = 5_000_001 if size >= GIB // 2 else 500_001
    width = max(20, size // (first + 200_000))
    per_chunk = max(1, MIB // width)

    def chunks() -> Iterator[bytes]:
        number = 1
        written = 0
        while written < size:
            block = b"".join(b"%0*d\n" % (width - 1, n) for n in range(number, number + per_chunk))
            number += per_chunk
            written += len(block)
            yield block

    built = time.perf_counter()
    meta = store.put(chunks(), session=SESSION, tool_name="t", tool_call_id="read")
    built = time.perf_counter() - built
    tools = SpillTools(store, session=SESSION)
    cold_start = time.perf_counter()
    page = tools.read(meta.spill_id, offset=first)
    cold = time.perf_counter() - cold_start
    text = page.content[0].text  # type: ignore[union-attr]
    assert not page.is_error and f"\t{first:0{width - 1}d}\n" in text
    shown = text.split("\n", 1)[0]
    samples = []
    for _ in range(reads):
        started = time.perf_counter()
        tools.read(meta.spill_id, offset=first)
        samples.append(time.perf_counter() - started)
    median = statistics.median(samples)
    out.append("")
    out.append(
        f"read_spill at line {first:,} of a {meta.total_bytes / GIB:.2f} GiB spill "
        f"({meta.total_lines:,} lines of {width} bytes; built by put in {built:.2f} s):"
    )
    out.append("")
    out.append(f"- page header: `{shown}`")
    out.append(f"- first call (index loaded from disk): {fmt(cold)}")
    verdict = "ok" if median <= 200e-6 else "MISSED (target 200 us)"
    out.append(f"- median of {reads} calls: {fmt(median)} ({verdict})")
    out.append(f"- p90: {fmt(sorted(samples)[int(reads * 0.9)])}")
    print("\n".join(out[-5:]), flush=True)
    shutil.rmtree(directory / "read")


def _cpu_seconds() -> float:
    """CPU time of this process and its waited-for children (grep)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed(
    fns: dict[str, Callable[[], object]], rounds: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Median wall and CPU seconds of each function, in interleaved rounds (CPU: this
    process plus its waited-for children, so grep's own)."""
    walls: dict[str, list[float]] = {key: [] for key in fns}
    cpus: dict[str, list[float]] = {key: [] for key in fns}
    for _ in range(rounds):
        for key, fn in fns.items():
            cpu, wall = _cpu_seconds(), time.perf_counter()
            fn()
            walls[key].append(time.perf_counter() - wall)
            cpus[key].append(_cpu_seconds() - cpu)
    return (
        {key: statistics.median(values) for key, values in walls.items()},
        {key: statistics.median(values) for key, values in cpus.items()},
    )


def bench_session(directory: Path, spills: int, rounds: int, out: list[str]) -> None:
    """Issue 14: a session-wide grep of N small spills against ``grep -rn``."""
    from benchmarks.bench_store import V2_PATTERN

    try:
        from spillstore._stores.catalog_store import CatalogStore
    except ImportError:  # the catalog is the local store
        stores: tuple[tuple[str, Callable[[Path], Store]], ...] = (("catalog", LocalStore),)
    else:
        stores = (("files", LocalStore), ("catalog", CatalogStore))

    out.append(
        f"Session-wide grep over {spills:,} spills of ~17 KB ({V2_PATTERN!r} in 1 spill in "
        f"500), {rounds} interleaved rounds, medians of wall and CPU time (CPU: this "
        "process plus grep's):"
    )
    out.append("")
    out.append("| store | what | wall | wall vs grep -rn | CPU | CPU vs grep -rn |")
    out.append("|---|---|---|---|---|---|")
    for name, cls in stores:
        for line in _session_rows(name, cls, directory / name, spills, rounds):
            out.append(line)
            print(line, flush=True)


def _session_rows(
    name: str, cls: Callable[[Path], Store], root: Path, spills: int, rounds: int
) -> list[str]:
    """One store's rows of :func:`bench_session` (its spills written first if missing)."""
    from benchmarks.bench_store import V2_PATTERN, _small_output

    store = cls(root)
    have = len(store.list("s")) if (root / "s").exists() else 0
    for n in range(have, spills):
        store.put(_small_output(n), session="s", tool_name="bash", tool_call_id=str(n))
    tools = SpillTools(cls(root), session="s")
    metas = tools.store.list("s")
    assert len(metas) == spills
    matcher = compile_pattern(V2_PATTERN, literal=True)
    session_dir = str(root / "s")

    def floor() -> int:
        found = 0
        dir_fd = os.open(session_dir, os.O_RDONLY | os.O_DIRECTORY)
        for meta in metas:
            fd = os.open(f"{meta.spill_id}.out", os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
            data = os.pread(fd, os.fstat(fd).st_size, 0)
            os.close(fd)
            found += matcher.raw(matcher.anchor, data, 0, len(data))[0][0] >= 0
        os.close(dir_fd)
        return found

    fns: dict[str, Callable[[], object]] = {
        "`grep -rn` (output drained)": run_grep("-rn", "--include=*.out", V2_PATTERN, session_dir),
        "grep_spill, count mode": lambda: tools.grep(V2_PATTERN, output_mode="count"),
        "grep_spill, content mode": lambda: tools.grep(V2_PATTERN),
        "grep_spill, spills mode": lambda: tools.grep(V2_PATTERN, output_mode="spills"),
        "`list` alone (a fresh store object)": lambda: cls(root).list("s"),
        "floor: open + read + one RE2 call a file": floor,
    }
    walls, cpus = _timed(fns, rounds)
    base = next(iter(fns))
    base_wall, base_cpu = walls[base], cpus[base]
    rows = []
    for key in fns:
        wall, cpu = walls[key], cpus[key]
        rows.append(
            f"| {name} | {key} | {fmt(wall)} | {wall / base_wall:.2f}x | {fmt(cpu)} "
            f"| {cpu / base_cpu:.2f}x |"
        )
    return rows


NOTES = """
Notes:

- `head_limit=0` (or null) means unlimited, as `max_turns=0` does elsewhere; the page cap
  (`max_page_bytes`, default 16,000) still bounds every result, so case (4) raises the cap
  to 1 GiB to make the tool list all matches, as `grep -n` does.
- Engine: every pattern is compiled by RE2 and searched on bytes (`mmap` of the spill).
  A literal is scanned by RE2's literal-prefix accelerator (~5.8 GB/s here) and by
  `mmap.find` (~2.2 GB/s, but 0.13 us a call against ~0.6 us for RE2) while hits are less
  than 1,600 bytes apart. For patterns that cannot match a newline, one RE2 call for
  `(?:pattern)[^\\n]*` gives both the match and its line end; a regex without a literal
  prefix is searched for its rarest required literal first (case 2b: 4.0x before, now
  about 0.25x).
- Cases (4) and (5): per matching line the tool pays one RE2 call (~0.6 us of pybind11
  and GIL overhead before any scanning), and for (4) one `bytes.count` of the newlines
  since the previous hit (CPython's single-byte count is a scalar loop, ~2.2 GB/s, and
  no stdlib call counts faster). Since session 5 the hits are found in batches and the
  line starts, numbers and text of a batch are each one comprehension of C calls; a
  literal is searched from its rarest character (RE2 `memchr`s a literal's first byte:
  `timeout` as `meout`). Threads do not help: `bytes.count` and `mmap.find` hold the
  GIL. For a rare word, count mode is far under grep (it only scans; case 5b). Since
  session 6 a spill's `mmap` with dense hits is listed in 1 MiB windows copied as bytes
  (`_tools/grep_plain.py`), and the row "the whole listing, lean, bytes in memory" is
  the same C calls with no store, index, paging or page text: the floor of this design
  in Python 3.11 (RESULTS.md, issue 17, session 6, has its instruction profile).
- The machine is shared: grep itself varied between 44 and 80 ms for `-c` across runs
  during the day, so ratios from interleaved rounds are what to compare.
"""


def record(lines: list[str], argv: list[str]) -> None:
    """Replace (or append) this benchmark's section of RESULTS.md, keeping the others."""
    path = ROOT / "benchmarks" / "RESULTS.md"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    if HEADING in text:
        before, _, rest = text.partition(HEADING)
        following = rest.find("\n## ")
        after = rest[following + 1 :] if following >= 0 else ""
        text = before.rstrip("\n") + "\n\n" + (after and after + "\n")
    command = " ".join(["benchmarks/bench_tools.py", *argv])
    section = [
        HEADING,
        "",
        f"Run: `.venv/bin/python {command}` on {time.strftime('%Y-%m-%d')}.",
        "",
        *lines,
    ]
    path.write_text(
        text.rstrip("\n") + "\n\n" + "\n".join(section).rstrip() + "\n", encoding="utf-8"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="10 MiB grep, 100 MiB read")
    parser.add_argument("--no-record", action="store_true", help="do not touch RESULTS.md")
    parser.add_argument("--dir", default=None, help="where the temporary files go")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument(
        "--only",
        choices=["grep", "redos", "read", "session"],
        default=None,
        help="run one part (no record)",
    )
    parser.add_argument("--spills", type=int, default=10_000, help="session: spills")
    parser.add_argument("--session-dir", default=None, help="session: where the spills stay")
    args = parser.parse_args()
    grep_size = 10 * MIB if args.quick else 100 * MIB
    read_size = 100 * MIB if args.quick else GIB
    rounds = args.rounds or (5 if args.quick else 11)
    grep_version = subprocess.run(
        ["grep", "--version"], stdout=subprocess.PIPE, check=True, text=True
    ).stdout.split("\n", 1)[0]
    lines = [f"machine: {machine()}; {grep_version}; {os.uname().sysname} {os.uname().release}"]
    lines.append("")
    print(lines[0], flush=True)
    directory = Path(tempfile.mkdtemp(prefix="bench-tools-", dir=args.dir))
    try:
        if args.only in (None, "grep"):
            bench_grep(directory, grep_size, rounds, lines)
        if args.only in (None, "redos"):
            bench_redos(directory, lines)
        if args.only in (None, "read"):
            bench_read(directory, read_size, 501, lines)
        if args.only == "session":
            kept = Path(args.session_dir) if args.session_dir else directory
            bench_session(kept, args.spills, args.rounds or 7, lines)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if not args.no_record and args.only is None:
        argv = [a for a in sys.argv[1:] if a != "--no-record"]
        record([*lines, *NOTES.rstrip().split("\n")], argv)


if __name__ == "__main__":
    main()
