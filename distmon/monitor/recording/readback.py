"""A recording read back: the job as it last stood, and every alert in its final form."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from distmon.monitor.recording.format import (
    AlertEvent,
    BatchRecord,
    ColumnRecord,
    Dropped,
    LooksRecord,
    MessageRecord,
)
from distmon.monitor.recording.reader import RecordingError, read_recording
from distmon.monitor.state.alerts import Alert
from distmon.monitor.state.ending import fates, first_cause
from distmon.monitor.state.job import JobState
from distmon.monitor.state.limits import LIMITS
from distmon.monitor.state.words import count, rank_word
from distmon.node import looks as eye_looks
from distmon.wire import WireError
from distmon.wire.column_batch import Incoming
from distmon.wire.sockets import Batch

BATCH = 4096
"""Messages taken in at a time."""
MAX_ALERT_BYTES = 256 * 1024 * 1024
"""Alert text kept for the report, at most: a week of flapping alerts is a few MB."""


@dataclass
class Postmortem:
    header: dict[str, Any]
    state: JobState = field(default_factory=lambda: JobState(LIMITS))
    alerts: list[Alert] = field(default_factory=list)
    """In the order raised, each as last updated, with ``resolved`` set if it ended."""
    first: float | None = None
    last: float | None = None
    trouble: str | None = None
    """What was wrong with the file (damaged records skipped, a cut), in one line."""

    @property
    def standing(self) -> list[Alert]:
        """The alerts that stood at the end: never resolved, or ended with the job."""
        return [a for a in self.alerts if a.resolved is None]

    @property
    def first_cause(self) -> Alert | None:
        """What the monitor concluded by the end: the alert that names the job's culprit
        among those that stood (:func:`distmon.monitor.state.ending.first_cause`, as the live
        header names it). An alarm that resolved itself while the job went on is no cause,
        however critical it was."""
        return first_cause(self.standing)

    def no_cause(self) -> str:
        """Why alerts were raised yet none is the first cause, in one line."""
        standing = self.standing
        if standing:
            return (
                f"No first cause: {count(len(standing), 'alert')} stood at the end, none a failure, a hang, a "
                "divergence or a stall (see the timeline)."
            )
        return (
            f"No first cause: {count(len(self.alerts), 'alert')} raised, none standing at the end; each resolved "
            "itself while the job went on."
        )

    @property
    def progressed(self) -> bool:
        """Some rank made a step, a forward pass or a collective during the recording."""
        return any(self.state.progress())

    def ending(self) -> str:
        """How the job ended, in one line (:meth:`JobState.ending`), or that it had not."""
        ranks = self.state.ranks.values()
        if not ranks:
            return "unknown: no rank reported"
        ending = self.state.ending(a for a in self.alerts if a.resolved is None)
        if ending is not None:
            return ending.words
        running = [s for s in ranks if not s.finished]
        known = fates(self.state, self.alerts, self.last or 0.0)
        unwatched = [s.rank for s in running if s.report.host in known.blind and s.report.host in known.unwatched]
        why = f" ({rank_word(unwatched)} trained on unwatched: their relay fell silent)" if unwatched else ""
        return f"not ended: {rank_word(s.rank for s in running)} had not exited when the recording stopped{why}"


def load_recording(path: str) -> Postmortem:
    """Read a recording; raises :class:`distmon.monitor.recording.reader.RecordingError` for a file
    that is no recording, or that is damaged and of which nothing could be read."""
    header, records = read_recording(path)
    pm = Postmortem(header=header)
    by_key: dict[str, Alert] = {}
    alert_bytes = 0
    messages: list[MessageRecord] = []
    for record in records:
        pm.first = record.t if pm.first is None else pm.first
        pm.last = record.t
        if isinstance(record, MessageRecord):
            messages.append(record)  # taken in by the thousand: the state reads a batch as arrays
            if len(messages) >= BATCH:
                _ingest(pm.state, messages)
            continue
        _ingest(pm.state, messages)
        if isinstance(record, BatchRecord | ColumnRecord):
            _take(pm.state, record.batch, record.t)
        elif isinstance(record, LooksRecord):
            _eyes(pm.state, record.looks, record.t)
        elif isinstance(record, Dropped):
            pm.state.refused(record.dropped)
            pm.state.not_watched(record.unwatched)
        elif isinstance(record, AlertEvent):
            alert = record.alert
            alert_bytes += len(alert.summary) + len(alert.detail) + 8 * len(alert.ranks)
            if alert_bytes > MAX_ALERT_BYTES:
                raise RecordingError(f"{path} holds over {MAX_ALERT_BYTES >> 20} MiB of alerts: not a recording")
            _apply(record, by_key, pm.alerts, stopping=pm.state.being_taken_down())
    _ingest(pm.state, messages)
    pm.trouble = records.trouble()
    if pm.trouble is not None and not records.count:
        raise RecordingError(pm.trouble)
    return pm


def _eyes(state: JobState, looks: bytes, t: float) -> None:
    """The nodes whose eyes spoke in a ``o`` record at ``t`` (their ranks were seen from
    outside), and the processes they saw end."""
    with contextlib.suppress(WireError):
        for one in eye_looks.decode_looks(looks):
            state.told.spoke(one.host)
            state.told.fared(one.reached, t)
            for sample in one.samples:
                if sample.state == "X":
                    state.told.saw_end(one.host, sample.pid, t)


def _ingest(state: JobState, messages: list[MessageRecord]) -> None:
    if messages:
        _take(state, Batch.of([m.payload for m in messages]), messages[-1].t, np.array([m.t for m in messages]))
        messages.clear()


def _take(state: JobState, batch: Incoming, t: float, times: npt.NDArray[np.float64] | None = None) -> None:
    """``batch`` taken in at ``t`` (each message at ``times``); a message the state cannot
    decode (a damaged file's) is counted as malformed and the batch taken in again without
    it, one message at a time."""
    try:
        state.ingest_batch(batch, t, times)
    except WireError:
        if not isinstance(batch, Batch):
            raise
        for i, frame in enumerate(batch.frames()):
            at = t if times is None else float(times[i])
            try:
                state.ingest_batch(Batch.of([frame]), at, np.array([at]))
            except WireError:
                state.refused({"malformed": 1})


def _apply(event: AlertEvent, by_key: dict[str, Alert], alerts: list[Alert], stopping: bool) -> None:
    """One alert change. While the job is being stopped, an alert resolved ends with the job
    as it stood, as the monitor keeps it now (:meth:`distmon.monitor.state.alerts.AlertBook.update`;
    older recordings resolved it in the teardown). A summary that repeats its kind (``hang:
    ...``, from older rules) is read without the repetition."""
    incoming = event.alert
    prefix = f"{incoming.kind}: "
    if incoming.summary.startswith(prefix):
        incoming.summary = incoming.summary[len(prefix) :]
    current = by_key.get(incoming.key)
    if event.event == "raised" or current is None:
        by_key[incoming.key] = incoming
        alerts.append(incoming)
        return
    current.severity, current.ranks = incoming.severity, incoming.ranks
    current.summary, current.detail = incoming.summary, incoming.detail
    if event.event == "resolved" and not stopping:
        current.resolved = event.t
        del by_key[incoming.key]
