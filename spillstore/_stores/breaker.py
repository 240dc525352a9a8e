"""A circuit breaker for a remote store: after an outage, fail fast, then probe.

A store whose endpoint stops answering costs each operation its whole retry budget (the
S3 store's is 3 retries within 20 s, and a 30 s timeout per request when connections
hang). An agent making 20 tool calls against a dead store would wait 20 minutes. So the
first operation that fails because the endpoint is unreachable or failing *opens* the
breaker: for a pause, every request fails at once with a :class:`StoreError` saying why
and when the store is tried again (the service turns it into a "NOT saved" preview, a
read into a short error result). The first request after the pause runs a cheap *probe*
first (one request, no retries, short timeouts; the other requests still fail fast
meanwhile). If the probe fails, the pause doubles, up to a maximum; if it answers, the
request goes on. A failure within one pause of that recovery doubles the pause too, so
an endpoint that answers probes but fails writes costs one full failure per pause, not
one per call. Requests already under way when the pause began (a list reads sidecars
eight at a time, an upload sends parts side by side) fail on their own and leave the
pause as it is.

The numbers (defaults of :class:`~spillstore._stores.s3_store.S3Store`): the first pause
is :data:`OUTAGE_PAUSE_SECONDS` (15 s: a blip costs the next few tool calls their
spill, no more), doubling to :data:`OUTAGE_MAX_PAUSE_SECONDS` (300 s: a store that comes
back is used again within 5 minutes). In a 20-minute outage that is at most 7 probes of
a few seconds each, instead of a full retry budget per request.

Before the endpoint has answered once, the store does not know it is there: a black
hole (a host that accepts connections and never replies) would cost the first request
its whole timeout (30 s). So the breaker's first request probes first, like the one
after a pause; the requests that come meanwhile wait for that probe (never longer than
its timeout) instead of failing, and a failed probe opens the breaker as a failed
request would. An answering endpoint pays one cheap request per store, once.

An outage is also told to the other processes on the machine when the store gives the
breaker a ``shared`` record (:class:`OutageRecord`; the S3 store's is a small file, see
:mod:`spillstore._stores.breaker_file`): a breaker that opens records the outage, a
closed one adopts an outage recorded there while it runs (as if it had found it itself:
it fails fast, then probes when the pause is over), and a probe that finds the endpoint
back clears it. A one-shot command then costs nothing during a pause another process
found.

The decisions are pure functions of a frozen :class:`Outage` and ``now``
(:func:`admit`, :func:`after_failure`, :func:`after_probe`); :class:`Breaker` holds the
state under a lock, with the clock and the probe injected.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from spillstore._errors import StoreError

__all__ = [
    "CLOSED",
    "OUTAGE_MAX_PAUSE_SECONDS",
    "OUTAGE_PAUSE_SECONDS",
    "Breaker",
    "Outage",
    "OutageRecord",
    "admit",
    "after_failure",
    "after_probe",
]

logger = logging.getLogger("spillstore")

OUTAGE_PAUSE_SECONDS: Final = 15.0
"""How long requests fail fast after the endpoint first failed."""

OUTAGE_MAX_PAUSE_SECONDS: Final = 300.0
"""The longest pause: each failed probe (or failure right after one) doubles it, to this."""

Decision = Literal["go", "probe", "refuse"]


@dataclass(frozen=True)
class Outage:
    """The breaker's state.

    Attributes:
        reason: why the endpoint was last found down (empty when closed).
        retry_at: when requests may try the endpoint again; None when closed.
        pause_seconds: the last pause (0: no outage yet).
        recovered_at: when a probe last found the endpoint back (a failure within
            ``pause_seconds`` of it doubles the pause).
        probing: one request is probing the endpoint (the others fail fast meanwhile).
    """

    reason: str = ""
    retry_at: float | None = None
    pause_seconds: float = 0.0
    recovered_at: float | None = None
    probing: bool = False


CLOSED: Final = Outage()
"""No outage yet."""


class OutageRecord(Protocol):
    """Where processes tell each other an outage (none of its methods may raise)."""

    def load(self, now: float, max_pause: float) -> Outage | None:
        """An outage recorded by another process that runs ``now`` (None: none)."""

    def save(self, state: Outage) -> None:
        """Record an open breaker's state."""

    def clear(self) -> None:
        """Forget the recorded outage."""


def admit(state: Outage, now: float) -> tuple[Decision, Outage]:
    """Whether a request may go: ``go`` (closed), ``probe`` (the pause is over and no
    other request probes; the returned state records that this one does) or ``refuse``."""
    if state.retry_at is None:
        return "go", state
    if state.probing or now < state.retry_at:
        return "refuse", state
    return "probe", dataclasses.replace(state, probing=True)


def after_failure(
    state: Outage, now: float, reason: str, *, first_pause: float, max_pause: float
) -> Outage:
    """The state after a request (or probe) found the endpoint down.

    1. Already paused, and no probe running: the same state (a request let through
       before the pause began, finishing now, says nothing new).
    2. The probe failed, or a request failed within one pause of a recovery: paused for
       twice the last pause, at most ``max_pause``.
    3. Otherwise: paused for ``first_pause``.
    """
    if state.retry_at is not None and not state.probing:
        return state
    recent = state.probing or (
        state.recovered_at is not None and now - state.recovered_at < state.pause_seconds
    )
    pause = min(2 * state.pause_seconds, max_pause) if recent else first_pause
    return Outage(reason=reason, retry_at=now + pause, pause_seconds=max(pause, first_pause))


def after_probe(state: Outage, now: float) -> Outage:
    """The state after a probe that the endpoint answered: closed, recovered ``now``."""
    return Outage(pause_seconds=state.pause_seconds, recovered_at=now)


class Breaker:
    """The circuit breaker of one store (thread-safe); see the module.

    Args:
        clock: epoch seconds (the store's clock).
        probe: one cheap request; returns None when the endpoint answered (whatever it
            said), else why it is down. It must not raise.
        reach: the probe before the store's first request: None when the endpoint
            replied at all (a 5xx too: that request's retries handle it), else why not.
            It must not raise. None: the first request goes unprobed.
        shared: the outage record shared with other processes (None: this process's
            own findings only).
        first_pause: seconds of the first pause.
        max_pause: the longest pause.
    """

    def __init__(
        self,
        clock: Callable[[], float],
        probe: Callable[[], str | None],
        *,
        first_pause: float = OUTAGE_PAUSE_SECONDS,
        max_pause: float = OUTAGE_MAX_PAUSE_SECONDS,
        reach: Callable[[], str | None] | None = None,
        shared: OutageRecord | None = None,
    ) -> None:
        self._clock = clock
        self._probe = probe
        self._reach = reach
        self._shared = shared
        self._first_pause = first_pause
        self._max_pause = max(first_pause, max_pause)
        self._lock = threading.Lock()
        self._state = CLOSED
        self._first = threading.Lock()
        self._answered = reach is None

    @property
    def state(self) -> Outage:
        """The current state."""
        return self._state

    def admit(self) -> None:
        """Let a request go, probing first when a pause just ended.

        Raises:
            StoreError: the endpoint is known to be down (at once, without a request).
        """
        if self._shared is not None and self._state.retry_at is None:
            self._adopt(self._shared)
        if not self._answered:
            self._first_probe()
        with self._lock:
            decision, self._state = admit(self._state, self._clock())
            refused = self._state
        if decision == "go":
            return
        if decision == "refuse":
            raise self._refusal(refused)
        reason: str | None = "the probe did not finish"
        try:
            reason = self._probe()
        finally:
            with self._lock:
                if reason is None:
                    self._answered = True
                    self._state = after_probe(self._state, self._clock())
                else:
                    self._state = after_failure(
                        self._state,
                        self._clock(),
                        reason,
                        first_pause=self._first_pause,
                        max_pause=self._max_pause,
                    )
                state = self._state
        if reason is None:
            logger.warning("the store answers again")
            if self._shared is not None:
                self._shared.clear()
            return
        logger.warning(
            "the store is still down (%s); next try in %.0f s", reason, state.pause_seconds
        )
        if self._shared is not None:
            self._shared.save(state)
        raise self._refusal(state)

    def _adopt(self, shared: OutageRecord) -> None:
        """Take on an outage another process recorded, while it runs."""
        found = shared.load(self._clock(), self._max_pause)
        if found is None:
            return
        with self._lock:
            if self._state.retry_at is not None:
                return
            self._state = found
        logger.warning(
            "the store was found down by another process (%s); requests fail fast", found.reason
        )

    def _first_probe(self) -> None:
        """Probe an endpoint never heard from yet (one request at a time: the others wait
        for its answer); a failed probe opens the breaker."""
        with self._first:
            if self._answered or self._state.retry_at is not None or self._reach is None:
                return
            reason = self._reach()
            if reason is None:
                self._answered = True
            else:
                self.failed(reason)

    def failed(self, reason: str) -> None:
        """Record a request that found the endpoint down (its retries spent)."""
        with self._lock:
            before = self._state
            self._state = after_failure(
                before,
                self._clock(),
                reason,
                first_pause=self._first_pause,
                max_pause=self._max_pause,
            )
            opened = self._state is not before
            state = self._state
        if opened:
            logger.warning(
                "the store failed (%s); requests fail fast for %.0f s", reason, state.pause_seconds
            )
            if self._shared is not None:
                self._shared.save(state)

    def _refusal(self, state: Outage) -> StoreError:
        wait = 0.0 if state.retry_at is None else max(0.0, state.retry_at - self._clock())
        error = StoreError(
            errno.EHOSTDOWN,
            f"the store is down, not tried again for {math.ceil(wait)} s (last failure: "
            f"{state.reason})",
        )
        error.__cause__ = ConnectionError(state.reason)
        return error
