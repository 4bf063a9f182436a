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
from typing import Protocol

import numpy as np
import numpy.typing as npt

from distmon.channel import DETAILS, Command
from distmon.columnar.batch import Incoming
from distmon.monitor.outside.probe import OutsideStacks, ProcessProbe
from distmon.monitor.recording.file import RecordingWriter
from distmon.monitor.rules.detector import Detector
from distmon.monitor.state import admission
from distmon.monitor.state.alerts import AlertBook, Change
from distmon.monitor.state.arrays import distinct
from distmon.monitor.state.job import JobState, RankState
from distmon.monitor.state.limits import Thresholds
from distmon.monitor.state.snapshot import Snapshot, take

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


class Responder(Protocol):
    """Acts on each tick's alert changes (see :mod:`distmon.actions.responder`)."""

    def after_tick(self, monitor: Monitor, changes: list[Change], now: float) -> list[Change]: ...


class Monitor:
    def __init__(
        self,
        detector: Detector | None = None,
        recorder: RecordingWriter | None = None,
        job: str | None = None,
        responder: Responder | None = None,
        max_world: int = admission.MAX_WORLD,
    ) -> None:
        self.state = JobState(job=job, pinned=job is not None, max_world=max_world)
        self.detector = detector or Detector()
        self.alerts = AlertBook()
        self.recorder = recorder
        self.responder = responder
        self._dropped_recorded: Counter[str] = Counter()
        self.snapshot: Snapshot = take(self.state, self.limits, self.alerts, 0.0)
        """The state as of the latest tick (empty before the first), for readers on other
        threads, once :meth:`start_publishing` is called."""
        self.publishing = False
        self.last_tick = 0.0
        """The time of the latest tick (0 before the first)."""
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
        if self.recorder is not None:
            if times is None or not len(admitted):
                if len(admitted) or batch.relays:  # an empty batch is a relay's sign of life
                    self.recorder.batch(now, batch.subset(admitted))
            else:
                arrived = times[admitted]
                for t in distinct(arrived):  # a record per arrival time: a replay ingests as this did
                    self.recorder.batch(float(t), batch.subset(admitted[arrived == t]))
        return len(admitted)

    def tick(self, now: float) -> list[Change]:
        """Run the detector; returns the alerts raised, updated or resolved."""
        findings = self.detector.evaluate(self.state, now)
        changes = self.alerts.update(findings, now, resolve=not self.state.being_stopped())
        if self.responder is not None:
            changes += self.responder.after_tick(self, changes, now)
        if self.recorder is not None:
            for change in changes:
                self.recorder.alert(now, change)
            self._record_dropped(self.recorder, now)
            self.recorder.sync_if_due()
        self.last_tick = now
        if self.publishing:
            self.publish(now)
        if GIVE_BACK is not None and abs(now - self._given_back) >= GIVE_BACK_EVERY:
            GIVE_BACK()
            self._given_back = now
        return changes

    def asking(self) -> Command | None:
        """What to ask the relays after a tick: the whole reports of the ranks looked at since
        the last one, and of those none came from (:meth:`JobState.wanted`), with every report
        from now on for a few seconds (:mod:`distmon.columnar.news`); None when there are none."""
        wanted = self.state.wanted()
        if not wanted:
            return None
        return Command(DETAILS, self.state.job or "", "the monitor looks at them", ranks=wanted[:MAX_ASKED])

    def away(self, since: float, why: str, seconds: int) -> None:
        """The monitor did not watch ``seconds`` from ``since`` (``why``: its loop stood
        still, or its clock jumped): counted with the drops, and recorded at ``since``, so
        that a replay is behind over the same seconds and names no rank for them either."""
        self.state.dropped[why] += seconds
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
        self.snapshot = take(self.state, self.limits, self.alerts, now)

    def _record_dropped(self, recorder: RecordingWriter, now: float) -> None:
        """What was refused since the last tick: refused messages are not recorded."""
        new = self.state.dropped - self._dropped_recorded
        if new:
            recorder.dropped(now, new)
            self._dropped_recorded = self.state.dropped.copy()

    def close(self) -> None:
        if self.recorder is not None:
            self.recorder.close()


def live_monitor(
    recorder: RecordingWriter | None,
    job: str | None = None,
    responder: Responder | None = None,
    max_world: int = admission.MAX_WORLD,
) -> Monitor:
    """A monitor of ranks running now, as ``watch`` and ``record`` run it: it may look at the
    ranks' processes on this host (alive or gone), take their stacks from outside, and act
    through ``responder``. Replays and tests judge the reports alone."""
    probe = ProcessProbe()
    detector = Detector(probe=probe, stacks=OutsideStacks(probe=probe), outside=probe.view)
    return Monitor(detector, recorder=recorder, job=job, responder=responder, max_world=max_world)
