"""What the monitor does about its alerts, after each tick: tell people, keep the evidence
of each critical alert, and end a hung job once its alert has stood long enough.

A hung collective never becomes a process failure, so without this the job idles until the
collective timeout (NCCL 10 min, gloo 30 min) and the launcher's restart policy never fires.
With ``abort_after``, once a ``hang``, ``divergence`` or ``rank_lost`` alert has stood that
long the responder writes the evidence, then tells every rank of the job to end (over the
reports' own connection, see :mod:`distmon.wire.sockets`): each rank's agent sends its last
report and dies of SIGTERM, as if torchrun had torn it down, so torchrun's
``--max-restarts`` or a scheduler's requeue takes over. A rank of this host that has not
ended ``END_GRACE`` seconds later (its agent thread starved by a native call) is killed.
Warnings never end a job.
"""

from __future__ import annotations

import functools
import itertools
import os
import queue
import signal
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import psutil

from distmon.actions.bundles import Bundle, EvidenceStore
from distmon.monitor.state import JobState
from distmon.monitor.state.alerts import CRITICAL, Alert, Change
from distmon.monitor.state.kinds import ENDING_KINDS
from distmon.monitor.state.words import duration, time_of_day
from distmon.node.pyspy import OutsideStack, executable
from distmon.wire import Report
from distmon.wire.sockets import DUMP, END, Command, Dump

if TYPE_CHECKING:
    from distmon.actions.notify import Notifications
    from distmon.monitor.pipeline import Monitor

EVIDENCE_WAIT = 8.0
"""Seconds a bundle waits for the ranks' Flight Recorder dumps and the outside stacks."""
MAX_DUMPS = 512
"""Ranks asked for a dump per bundle: the named ranks first, then the lowest others."""
MAX_OUTSIDE_STACKS = 8
"""Named ranks whose stacks are taken from outside (py-spy runs one at a time)."""
END_GRACE = 10.0
"""Seconds the ranks get to end themselves before this host's are killed."""


class Connection(Protocol):
    """The monitor's connection to the ranks (a :class:`~distmon.monitor.intake.receiver.Receiver`
    or a :class:`~distmon.monitor.intake.feeds.LiveFeed`)."""

    def send(self, command: Command) -> int: ...

    def take_dumps(self) -> list[Dump]: ...


@dataclass
class Ended:
    """distmon ended the job: because of ``alert``, at ``t``."""

    alert: Alert
    t: float
    evidence: Path | None


class Writer:
    """The disk, on a thread of its own: bundles are placed and written there, in the order
    asked, so that the monitor's loop (Textual's event loop under ``watch``) never waits on it."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="distmon-evidence", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], object]) -> None:
        self._jobs.put(job)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job()
            except Exception as e:  # a full disk must not end the monitor
                _say(f"distmon: could not write evidence: {e}")

    def close(self, timeout: float) -> None:
        self._jobs.put(None)
        self._thread.join(timeout)


class Responder:
    def __init__(
        self,
        link: Connection,
        evidence: EvidenceStore | None = None,
        notifications: Notifications | None = None,
        abort_after: float | None = None,
    ) -> None:
        self.link = link
        self.evidence = evidence
        self.notifications = notifications
        self.abort_after = abort_after
        self.ended: Ended | None = None
        self.written: list[Path] = []
        """Bundles written, oldest first."""
        self._writer = Writer() if evidence is not None else None
        self._pending: list[Bundle] = []
        """Bundles gathering their dumps and stacks."""
        self._writing: dict[Bundle, threading.Event] = {}
        """Bundles handed to the writer, and whether it is done with each."""
        self._ending: tuple[Alert, Bundle | None] | None = None
        self._requests = itertools.count(1)
        self._killed = False
        self._host = socket.gethostname()

    def after_tick(self, monitor: Monitor, changes: list[Change], now: float) -> list[Change]:
        """Act on one tick's alert changes; returns the changes it made itself."""
        for dump in self.link.take_dumps():
            for bundle in self._pending:
                if bundle.accept(dump) and self._writer is not None:
                    self._writer.submit(functools.partial(bundle.write, dump))
        if self.notifications is not None:
            self.notifications.changes(changes)
        if self.evidence is not None:
            for change in changes:
                if (change.event == "raised" and change.alert.severity == CRITICAL) or change.escalated:
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
        bundle = Bundle(alert, request, asked, now + EVIDENCE_WAIT)
        assert self._writer is not None
        self._writer.submit(functools.partial(self.evidence.place, bundle, now))
        whole = len(asked) == len(alive)
        self.link.send(Command(DUMP, state.job, f"evidence of {alert.kind}", request, None if whole else asked))
        self._outside_stacks(monitor, alert, take=True)
        self._pending.append(bundle)
        return bundle

    def _finish_due(self, monitor: Monitor, now: float) -> None:
        for bundle in list(self._pending):
            stacks = self._outside_stacks(monitor, bundle.alert, take=False)
            answered = all(s is not None for s in stacks.values())
            if (bundle.complete and answered) or now >= bundle.deadline:
                self._pending.remove(bundle)
                state = monitor.state  # reports are replaced on arrival, never changed: hand them over
                reports = {rank: s.report for rank, s in state.ranks.items()}
                done = self._writing[bundle] = threading.Event()
                assert self._writer is not None
                self._writer.submit(
                    functools.partial(self._write, bundle, state.job, state.job_world, reports, stacks, done)
                )

    def _write(
        self,
        bundle: Bundle,
        job: str | None,
        world: int | None,
        reports: dict[int, Report],
        stacks: dict[int, OutsideStack | None],
        done: threading.Event,
    ) -> None:
        """On the writer's thread."""
        assert self.evidence is not None
        try:
            if bundle.path is None:
                return
            try:
                bundle.finish(job, world, reports, stacks)
            except OSError as e:
                _say(f"distmon: could not write the evidence in {bundle.path}: {e.strerror}")
                return
            self.written.append(bundle.path)
            _say(f"distmon: evidence of the {bundle.alert.kind} alert in {bundle.path}")
            self.evidence.prune()
        finally:
            done.set()

    def close(self, timeout: float) -> None:
        """Let the writer finish what it was given, for at most ``timeout`` seconds."""
        if self._writer is not None:
            self._writer.close(timeout)

    def _outside_stacks(self, monitor: Monitor, alert: Alert, take: bool) -> dict[int, OutsideStack | None]:
        """The named ranks' stacks from outside, asked once per alert and collected later. Where
        py-spy is not here, only of ranks gone silent: the stack would come from the rank's
        faulthandler, whose dump of every thread from a signal handler is safe while one thread
        holds the GIL (the others cannot run) but may crash a rank whose own threads run Python
        (its hook's sampler); a rank still reporting has its Python stack in its reports."""
        _, source, _ = monitor.detector.sources
        if source is None:
            return {}
        traced = executable() is not None
        stacks: dict[int, OutsideStack | None] = {}
        for rank in alert.ranks[:MAX_OUTSIDE_STACKS]:
            s = monitor.state.ranks.get(rank)
            if s is not None and not s.finished and (traced or s.silent(alert.t)):
                stacks[rank] = source(s.report.host, s.report.pid, alert.t, take)
        return stacks

    def _end_if_due(self, monitor: Monitor, now: float) -> list[Change]:
        if self.abort_after is None or self.ended is not None or monitor.state.job is None:
            return []
        if self._ending is None:
            due = [
                a
                for a in monitor.alerts.active.values()
                if a.kind in ENDING_KINDS and a.severity == CRITICAL and now - a.t >= self.abort_after
            ]
            if not due:
                return []
            alert = min(due, key=lambda a: a.t)
            self._ending = (alert, self._collect(monitor, alert, now) if self.evidence else None)
        alert, bundle = self._ending
        if monitor.alerts.active.get(alert.key) is not alert:
            self._ending = None  # the alert ended while its evidence was taken: the job goes on
            return []
        if bundle is not None and (bundle in self._pending or not self._writing[bundle].is_set()):
            return []  # its evidence is not on disk yet
        return self._end(monitor, alert, bundle, now)

    def _end(self, monitor: Monitor, alert: Alert, bundle: Bundle | None, now: float) -> list[Change]:
        assert self.abort_after is not None and monitor.state.job is not None
        stood = duration(now - alert.t)
        evidence = f"; evidence in {bundle.path}" if bundle is not None and bundle.path in self.written else ""
        reason = f"the {alert.kind} alert stood {stood} (--abort-on-hang {duration(self.abort_after)})"
        self.link.send(Command(END, monitor.state.job, reason))
        self.ended = Ended(alert, now, bundle.path if evidence and bundle is not None else None)
        _say(f"distmon: ending the job: {reason}: {alert.headline}{evidence}")
        change = monitor.alerts.annotate(alert.key, f"distmon ended the job at {time_of_day(now)}: {reason}{evidence}.")
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
