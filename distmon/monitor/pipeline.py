"""The monitor pipeline shared by ``watch``, ``record`` and ``replay``: messages in,
state updated, detector run, alerts out, everything recorded.

It owns no thread and no clock: callers pass ``now``, so live runs, replays and tests
drive the same code.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

import numpy as np
import numpy.typing as npt

from distmon.monitor.outside.sight import Sight
from distmon.monitor.recording.writer import RecordingWriter
from distmon.monitor.rules.detector import Detector
from distmon.monitor.state import JobState, RankState, admission
from distmon.monitor.state.alerts import AlertBook, Change
from distmon.monitor.state.array_sets import distinct
from distmon.monitor.state.limits import Thresholds
from distmon.monitor.state.snapshot import Snapshot, take
from distmon.node import looks as eye_looks
from distmon.node.looks import Wanted
from distmon.wire import WireError
from distmon.wire.column_batch import Incoming
from distmon.wire.sockets import DETAILS, LOOK, MAX_LOOKED, Command

MAX_ASKED = 4096
"""Ranks one request for whole reports names at most (the ranks kept decoded): the lowest
first; the others are asked for again if they are still looked at."""
GIVE_BACK_EVERY = 60.0
"""Seconds of the monitor's clock between two returns of freed memory to the system."""


def _malloc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``, where there is one (Linux; not macOS). A whole job's hang
    changes every rank's report at once, twice: the reports replaced, glibc keeps the memory
    they held, in pieces it may not reuse for reports of another size, and the monitor's
    resident memory would step up with each such incident. Given back, it stays flat
    (``benchmarks/bench_soak.py``)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    return lambda: trim(0)


GIVE_BACK = _malloc_trim()


class Acting(Protocol):
    """Acts on each tick's alert changes (:class:`distmon.actions.responder.Responder`)."""

    def after_tick(self, monitor: Monitor, changes: list[Change], now: float) -> list[Change]: ...


IDLE_TICK = 1.0
"""Seconds between two ticks told to the screens while no message has come (:meth:`Monitor.idle`)."""


class Screens(Protocol):
    """The screens attached to a live monitor (:mod:`distmon.monitor.attach.serve`): they are
    handed every batch admitted, as the recording is, and every tick."""

    @property
    def attached(self) -> bool:
        """Whether any screen is attached: with none, a batch costs nothing."""
        ...

    def batch(self, t: float, batch: Incoming) -> None: ...

    def tick(self, monitor: Monitor, now: float, changes: list[Change]) -> None: ...

    def close(self) -> None: ...


class Monitoring(Protocol):
    """What a session drives and a screen shows: the job's state and alerts, taken in from a
    feed at its times and ticked once a second. A :class:`Monitor` judges them; the monitor of
    a screen attached to another (:class:`~distmon.monitor.attach.follow.AttachedMonitor`)
    keeps that one's judgements."""

    state: JobState
    alerts: AlertBook
    last_tick: float

    @property
    def limits(self) -> Thresholds: ...
    @property
    def pausing(self) -> dict[int, str]:
        """Ranks in a pause the job takes as a habit, with what it is: no alert, their status."""
        ...

    def ingest_batch(self, batch: Incoming, now: float, times: npt.NDArray[np.float64] | None = None) -> int: ...
    def saw(self, blobs: list[bytes], now: float) -> None: ...
    def tick(self, now: float) -> list[Change]: ...
    def asking(self) -> list[Command]: ...
    def idle(self, now: float) -> None: ...
    def away(self, since: float, why: str, seconds: int) -> None: ...
    def close(self) -> None: ...


def take_looks(state: JobState, sight: Sight, blobs: list[bytes], now: float) -> list[eye_looks.Looks]:
    """What the nodes' eyes saw (a batch's looks), come at ``now``, taken into ``sight``; what
    is new. A blob that is not looks is counted, as a malformed message is."""
    looks = []
    for blob in blobs:
        try:
            looks += eye_looks.decode_looks(blob)
        except WireError as e:
            state.refused({e.reason: 1})
    return sight.saw(looks, now)


class Monitor:
    def __init__(
        self,
        detector: Detector | None = None,
        recorder: RecordingWriter | None = None,
        job: str | None = None,
        responder: Acting | None = None,
        max_world: int = admission.MAX_WORLD,
        screens: Screens | None = None,
    ) -> None:
        self.detector = detector or Detector()
        self.state = JobState(self.detector.limits, job=job, pinned=job is not None, max_world=max_world)
        self.sight = Sight(self.state.told)
        """What the nodes' eyes saw of the job's processes, as they handed it over."""
        if self.detector.sight is None:
            self.detector.sight = self.sight
        self.alerts = AlertBook()
        self.recorder = recorder
        self.responder = responder
        self.screens = screens
        self._recorded: tuple[Counter[str], Counter[str]] = (Counter(), Counter())
        """The drops and the seconds not watched as of the last ``d`` record."""
        self.snapshot: Snapshot = take(self.state, self.alerts, 0.0)
        """The state as of the latest tick (empty before the first), for readers on other
        threads, once :meth:`start_publishing` is called."""
        self.publishing = False
        self.last_tick = 0.0
        """The time of the latest tick (0 before the first)."""
        self._idled = 0.0
        self._given_back = 0.0

    @property
    def limits(self) -> Thresholds:
        """The thresholds the detector judges by: views of this monitor judge by them too."""
        return self.detector.limits

    def ingest(self, raw: bytes, now: float) -> RankState | None:
        """One message; the rank it was admitted for, or None."""
        state = self.state.ingest(raw, now)
        if state is not None and self.recorder is not None:
            self.recorder.message(now, raw)
        return state

    def ingest_batch(self, batch: Incoming, now: float, times: npt.NDArray[np.float64] | None = None) -> int:
        """A batch of frames or a relay's columns (``times[i]`` when frame ``i`` arrived,
        ``now`` by default), the admitted ones recorded as received (refused ones are counted,
        not recorded); returns how many were admitted."""
        admitted = self.state.ingest_batch(batch, now, times)
        screens = self.screens if self.screens is not None and self.screens.attached else None
        if self.recorder is not None or screens is not None:
            for t, taken in _as_received(batch, admitted, now, times):
                if self.recorder is not None:
                    self.recorder.batch(t, taken)
                if screens is not None:
                    screens.batch(t, taken)
        return len(admitted)

    def saw(self, blobs: list[bytes], now: float) -> None:
        """What the nodes' eyes saw (a batch's looks), come at ``now``, taken into the sight;
        what is new recorded at that time. A blob that is not looks is counted, as a malformed
        message is."""
        new = take_looks(self.state, self.sight, blobs, now)
        if new and self.recorder is not None:
            self.recorder.looks(now, eye_looks.encode_looks(new))

    def tick(self, now: float) -> list[Change]:
        """Run the detector; returns the alerts raised, updated or resolved."""
        self.sight.now = now
        self.sight.blind(self.state.blind_hosts(now))
        findings = self.detector.evaluate(self.state, now)
        changes = self.alerts.update(findings, now, resolve=not self.state.being_taken_down())
        self._record(changes, now)
        if self.responder is not None:
            made = self.responder.after_tick(self, changes, now)
            self._record(made, now)
            changes += made
        if self.recorder is not None:
            self._record_dropped(self.recorder, now)
            self.recorder.sync_if_due()
        self.last_tick = now
        if self.publishing:
            self.publish(now)
        if self.screens is not None:
            self.screens.tick(self, now, changes)
        if GIVE_BACK is not None and abs(now - self._given_back) >= GIVE_BACK_EVERY:
            GIVE_BACK()
            self._given_back = now
        return changes

    def _record(self, changes: list[Change], now: float) -> None:
        """Alert changes into the recording, flushed into its file before anyone acts on them
        or says them (the stderr line, the screen, a notification, the job ended): whatever
        ends the monitor next, its file holds what it said."""
        if self.recorder is not None and changes:
            for change in changes:
                self.recorder.alert(now, change)
            self.recorder.flush()

    def asking(self) -> list[Command]:
        """What to ask after a tick: the relays, the whole reports of the ranks looked at since
        the last one, and of those none came from (:meth:`JobState.wanted`), with every report
        from now on for a few seconds (:mod:`distmon.node.news`); the nodes' eyes, to look
        at the processes the rules asked about and take the stacks they want
        (:meth:`Sight.wanted`)."""
        asking = []
        wanted = self.state.wanted()
        if wanted:
            asking.append(Command(DETAILS, self.state.job or "", "the monitor looks at them", ranks=wanted[:MAX_ASKED]))
        looks = self.sight.wanted()
        if looks:
            encoded = [self._training(w).encoded() for w in looks[:MAX_LOOKED]]
            asking.append(Command(LOOK, self.state.job or "", "the rules look at them", looks=encoded))
        return asking

    def _training(self, wanted: Wanted) -> Wanted:
        """``wanted`` with the threads of its process a rank's report names: the one that
        trains (the one to look at: not the main thread under Ray Train) and distmon's own."""
        rank = self.state.rank_of_process(wanted.host, wanted.pid)
        if rank is None:
            return wanted
        report = self.state.report_of(rank)
        return replace(wanted, tid=report.tid, thread=report.thread, reporter=report.reporter)

    def idle(self, now: float) -> None:
        """No message has come yet, so nothing ticks: the screens attached still hear from the
        monitor every :data:`IDLE_TICK` of ``now``, and one attached now is told the job as it
        stands (nobody has reported)."""
        if self.screens is not None and now >= self._idled + IDLE_TICK:
            self._idled = now
            self.screens.tick(self, now, [])

    @property
    def pausing(self) -> dict[int, str]:
        """Ranks in a pause the job takes as a habit, with what it is, as of the latest tick
        (:attr:`distmon.monitor.rules.routine.Routine.pausing`): no alert, their status."""
        return self.detector.routine.pausing

    def away(self, since: float, why: str, seconds: int) -> None:
        """The monitor did not watch ``seconds`` from ``since`` (``why``: its loop stood
        still, or its clock jumped): counted in :attr:`JobState.unwatched`, and recorded at
        ``since``, so that a replay is behind over the same seconds and names no rank for them
        either."""
        self.state.not_watched({why: seconds})
        if self.recorder is not None:
            self._record_dropped(self.recorder, since)

    def start_publishing(self) -> None:
        """Publish a :attr:`snapshot` at every tick from now on, and one of the latest tick
        now: for a reader on another thread (a snapshot costs a tick a few arrays' copies, so
        only when there is one). Call it on the monitor's thread."""
        self.publishing = True
        self.publish(self.last_tick)

    def publish(self, now: float) -> None:
        """Replace :attr:`snapshot` with the state at ``now``: a reader on another thread takes
        the reference once and reads a tick whole, never the live state."""
        self.snapshot = take(self.state, self.alerts, now)

    def _record_dropped(self, recorder: RecordingWriter, now: float) -> None:
        """What was refused, and the seconds not watched, since the last ``d`` record: refused
        messages are not recorded."""
        dropped, unwatched = self.state.dropped, self.state.unwatched
        new = (dropped - self._recorded[0], unwatched - self._recorded[1])
        if any(new):
            recorder.dropped(now, *new)
            self._recorded = (dropped.copy(), unwatched.copy())

    def close(self) -> None:
        """The recording finished first: nothing after it may keep it from its end."""
        try:
            if self.recorder is not None:
                self.recorder.close()
        finally:
            if self.screens is not None:
                self.screens.close()


def _as_received(
    batch: Incoming, admitted: npt.NDArray[np.int64], now: float, times: npt.NDArray[np.float64] | None
) -> list[tuple[float, Incoming]]:
    """The frames of ``batch`` admitted, a batch per arrival time, as the recording keeps them: a
    replay ingests them as this monitor did. An empty batch is a relay's sign of life."""
    if times is None or not len(admitted):
        return [(now, batch.subset(admitted))] if len(admitted) or batch.relays else []
    arrived = times[admitted]
    return [(float(t), batch.subset(admitted[arrived == t])) for t in distinct(arrived)]


def live_monitor(
    recorder: RecordingWriter | None,
    job: str | None = None,
    responder: Acting | None = None,
    max_world: int = admission.MAX_WORLD,
    screens: Screens | None = None,
) -> Monitor:
    """A monitor of ranks running now, as ``watch`` and ``record`` run it: it acts through
    ``responder`` and feeds the screens attached to it. What it sees of the ranks' processes
    comes with its feed, from the nodes' eyes (its own host's among them), as a replay's does."""
    return Monitor(recorder=recorder, job=job, responder=responder, max_world=max_world, screens=screens)
