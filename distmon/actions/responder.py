"""What the monitor does about its alerts, after each tick: tell people, keep the evidence
of each critical alert, and end a hung job once its alert has stood long enough.

A hung collective never becomes a process failure, so without this the job idles until the
collective timeout (NCCL 10 min, gloo 30 min) and the launcher's restart policy never fires.
With ``abort_after``, once a ``hang``, ``divergence`` or ``rank_lost`` alert has stood that
long the responder writes the evidence, then tells every rank of the job to end (over the
reports' own connection, see :mod:`distmon.channel`): each rank's agent sends its last
report and dies of SIGTERM, as if torchrun had torn it down, so torchrun's
``--max-restarts`` or a scheduler's requeue takes over. A rank of this host that has not
ended ``END_GRACE`` seconds later (its agent thread starved by a native call) is killed.
Warnings never end a job.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import psutil

from distmon.actions.evidence import Bundle, EvidenceStore
from distmon.channel import DUMP, END, Command, Dump
from distmon.monitor.alerts import CRITICAL, Alert, Change
from distmon.monitor.state import JobState
from distmon.monitor.words import duration
from distmon.pyspy import OutsideStack

if TYPE_CHECKING:
    from distmon.actions.notify import Notifications
    from distmon.monitor.monitor import Monitor

ABORT_KINDS = frozenset({"hang", "divergence", "rank_lost"})
EVIDENCE_WAIT = 8.0
"""Seconds a bundle waits for the ranks' Flight Recorder dumps and the outside stacks."""
MAX_DUMPS = 512
"""Ranks asked for a dump per bundle: the named ranks first, then the lowest others."""
MAX_OUTSIDE_STACKS = 8
"""Named ranks whose stacks are taken from outside (py-spy runs one at a time)."""
END_GRACE = 10.0
"""Seconds the ranks get to end themselves before this host's are killed."""


class Channel(Protocol):
    """The monitor's connection to the ranks (a :class:`~distmon.monitor.receiver.Receiver`
    or a :class:`~distmon.monitor.feeds.LiveFeed`)."""

    def send(self, command: Command) -> int: ...

    def take_dumps(self) -> list[Dump]: ...


@dataclass
class Ended:
    """distmon ended the job: because of ``alert``, at ``t``."""

    alert: Alert
    t: float
    evidence: Path | None


class Responder:
    def __init__(
        self,
        channel: Channel,
        evidence: EvidenceStore | None = None,
        notifications: Notifications | None = None,
        abort_after: float | None = None,
    ) -> None:
        self.channel = channel
        self.evidence = evidence
        self.notifications = notifications
        self.abort_after = abort_after
        self.ended: Ended | None = None
        self.written: list[Path] = []
        """Bundles written, oldest first."""
        self._pending: list[Bundle] = []
        self._ending: tuple[Alert, Bundle | None] | None = None
        self._requests = itertools.count(1)
        self._killed = False
        self._host = socket.gethostname()

    def after_tick(self, monitor: Monitor, changes: list[Change], now: float) -> list[Change]:
        """Act on one tick's alert changes; returns the changes it made itself."""
        for dump in self.channel.take_dumps():
            for bundle in self._pending:
                bundle.add(dump)
        if self.notifications is not None:
            self.notifications.changes(changes)
        if self.evidence is not None:
            for change in changes:
                if change.event == "raised" and change.alert.severity == CRITICAL:
                    self._collect(monitor, change.alert, now)
        self._finish_due(monitor, now)
        made = self._end_if_due(monitor, now)
        if self.ended is not None and not self._killed and now - self.ended.t >= END_GRACE:
            self._killed = True
            self._kill_leftovers(monitor.state)
        return made

    def _collect(self, monitor: Monitor, alert: Alert, now: float) -> Bundle | None:
        """Open a bundle for ``alert`` and ask the ranks for what goes in it."""
        assert self.evidence is not None
        state = monitor.state
        if state.job is None:
            return None
        request = next(self._requests)
        alive = [r for r, s in sorted(state.ranks.items()) if not s.finished]
        named = [r for r in alert.ranks if r in state.ranks and not state.ranks[r].finished]
        asked = (named + [r for r in alive if r not in named])[:MAX_DUMPS]
        bundle = self.evidence.open(alert, request, asked, now, now + EVIDENCE_WAIT)
        if bundle is None:
            return None
        whole = len(asked) == len(alive)
        self.channel.send(Command(DUMP, state.job, f"evidence of {alert.kind}", request, None if whole else asked))
        self._outside_stacks(monitor, alert, take=True)
        self._pending.append(bundle)
        return bundle

    def _finish_due(self, monitor: Monitor, now: float) -> None:
        for bundle in list(self._pending):
            stacks = self._outside_stacks(monitor, bundle.alert, take=False)
            answered = all(s is not None for s in stacks.values())
            if (bundle.complete and answered) or now >= bundle.deadline:
                self._pending.remove(bundle)
                try:
                    bundle.finish(monitor.state, stacks)
                except OSError as e:
                    _say(f"distmon: could not write the evidence in {bundle.path}: {e.strerror}")
                    continue
                self.written.append(bundle.path)
                _say(f"distmon: evidence of the {bundle.alert.kind} alert in {bundle.path}")
                assert self.evidence is not None
                self.evidence.prune()

    def _outside_stacks(self, monitor: Monitor, alert: Alert, take: bool) -> dict[int, OutsideStack | None]:
        """The named ranks' stacks from outside, asked once per alert and collected later."""
        source = monitor.detector.stacks
        if source is None:
            return {}
        stacks: dict[int, OutsideStack | None] = {}
        for rank in alert.ranks[:MAX_OUTSIDE_STACKS]:
            s = monitor.state.ranks.get(rank)
            if s is not None and not s.finished:
                stacks[rank] = source(s.report.host, s.report.pid, alert.t, take)
        return stacks

    def _end_if_due(self, monitor: Monitor, now: float) -> list[Change]:
        if self.abort_after is None or self.ended is not None or monitor.state.job is None:
            return []
        if self._ending is None:
            due = [
                a
                for a in monitor.alerts.active.values()
                if a.kind in ABORT_KINDS and a.severity == CRITICAL and now - a.t >= self.abort_after
            ]
            if not due:
                return []
            alert = min(due, key=lambda a: a.t)
            self._ending = (alert, self._collect(monitor, alert, now) if self.evidence else None)
        alert, bundle = self._ending
        if monitor.alerts.active.get(alert.key) is not alert:
            self._ending = None  # the alert ended while its evidence was taken: the job goes on
            return []
        if bundle is not None and bundle in self._pending:
            return []
        return self._end(monitor, alert, bundle, now)

    def _end(self, monitor: Monitor, alert: Alert, bundle: Bundle | None, now: float) -> list[Change]:
        assert self.abort_after is not None and monitor.state.job is not None
        stood = duration(now - alert.t)
        evidence = f"; evidence in {bundle.path}" if bundle is not None and bundle.path in self.written else ""
        reason = f"the {alert.kind} alert stood {stood} (--abort-on-hang {duration(self.abort_after)})"
        self.channel.send(Command(END, monitor.state.job, reason))
        self.ended = Ended(alert, now, bundle.path if evidence and bundle is not None else None)
        _say(f"distmon: ending the job: {reason}: {alert.headline}{evidence}")
        when = time.strftime("%H:%M:%S", time.localtime(now))
        change = monitor.alerts.annotate(alert.key, f"distmon ended the job at {when}: {reason}{evidence}.")
        if change is None:
            return []
        if self.notifications is not None:
            self.notifications.tell("updated", alert)
        return [change]

    def _kill_leftovers(self, state: JobState) -> None:
        """Kill this host's ranks that did not end when told: their agent could not run."""
        for rank, s in sorted(state.ranks.items()):
            r = s.report
            if s.finished or r.host != self._host:
                continue
            try:
                process = psutil.Process(r.pid)
                if process.create_time() > s.first_seen:
                    continue  # the pid was reused by a process born after the rank reported
                os.kill(r.pid, signal.SIGKILL)
            except (psutil.Error, OSError):
                continue
            _say(f"distmon: rank {rank} (pid {r.pid}) did not end within {duration(END_GRACE)}; killed it")


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
