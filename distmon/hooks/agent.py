"""The per-rank agent: a background thread that samples the rank and sends reports.

The training thread only bumps counters (:mod:`distmon.hooks.progress`). This thread
reads them, the Flight Recorder, memory and DataLoader workers once per interval, or at
once when woken (an exception, the exit), and sends one :class:`Report` over ZeroMQ. The
same socket brings the monitor's commands (:mod:`distmon.wire.sockets`), which this thread
carries out: a Flight Recorder dump for the evidence, or ending the rank.

ZeroMQ is set up so that it can never hurt training: sends never block, nothing is
queued for a monitor that is not there (``IMMEDIATE``), the queue toward a slow one is
short (``SNDHWM``), and closing never waits longer than ``EXIT_LINGER_MS``. With a job key,
the socket is a CURVE client: the handshake runs in ZeroMQ's own thread, and until it
succeeds the socket counts as not connected, so reports are dropped, not queued.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
from typing import Any

import torch
import torch.distributed as dist
import zmq

from distmon import keys
from distmon.hooks import identity, stacksignal
from distmon.hooks.collectives import GroupReader
from distmon.hooks.lastwords import LastWords
from distmon.hooks.loaders import LoaderWatch
from distmon.hooks.p2p import P2PTracker
from distmon.hooks.pace_sampler import MIN_STEPS, PaceSampler
from distmon.hooks.progress import Counters
from distmon.hooks.raytrain import RayTrainErrors
from distmon.hooks.resources import GpuReader, UsageReader, host_memory
from distmon.hooks.stacks import thread_stack
from distmon.hooks.termination import TerminationWatch
from distmon.hooks.training import LeavingWatch, TrainingThread
from distmon.node.pyspy import TRACER_ENV, allow_tracer
from distmon.wire import (
    ENDED,
    FINISHED,
    INTERRUPTED,
    MAX_ROWS,
    TERMINATED,
    ExceptionInfo,
    ExitInfo,
    Report,
    WireError,
    encode,
    stall_after,
)
from distmon.wire.sockets import DUMP, END, MAX_DUMP_MESSAGE_BYTES, RANK_SOCKET, Dump, decode_command, dump_frames

CONNECT_GRACE = 0.5
"""How long after start a report may wait for ZeroMQ to connect, so that a rank failing at
once is still heard; after that, a report for an absent monitor is dropped at once, and until
one report has gone the agent sends the next the moment the monitor connects, not an interval
later."""
SEND_HWM = 8
EXIT_LINGER_MS = 500
LAST_WORDS_WAIT = 2.0
"""Seconds a rank that raised or is exiting waits for the agent's report of it. On an idle host it leaves in
milliseconds; on a loaded one (two cores under a CI run, a CPU burner and more) a fresh clone's run saw a raising
script leave without its exit report at the 1 s this was: a rank that left without it would read as killed. Only
where the agent is slow does the wait delay the rank's exit (and torchrun's teardown of the others after it), by
this much at most."""


class Agent:
    def __init__(self, endpoint: str, interval: float, key: keys.JobKey | None = None) -> None:
        self.endpoint = endpoint
        self.interval = interval
        self._key = key
        self.progress = Counters()
        self._p2p = P2PTracker()
        self._groups = GroupReader(self._p2p)
        self._pace = PaceSampler(self.progress, self._groups.waiting)
        self._gpu = GpuReader()
        self._usage = UsageReader()
        self._loaders = LoaderWatch(self.progress)
        self.training = TrainingThread()
        self._last_words = LastWords(self._report_exception, self._report_exit, self._report_interrupt, self._trains)
        self._ray_errors = RayTrainErrors(self._report_exception)
        self._leaving = LeavingWatch(self.say_goodbye)
        self._optimizer_hook: Any = None
        self._termination = TerminationWatch()
        self._thread = threading.Thread(target=self._run, name="distmon-agent", daemon=True)
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_write, False)
        self._sent = threading.Condition()
        self._stopping = False
        self._reports = 0
        self._dropped = 0
        self._delivered = False
        """A report has gone: the monitor was connected once."""
        self._exception: ExceptionInfo | None = None
        self._exit: ExitInfo | None = None
        self._last_marker: tuple[int, ...] = ()
        self._said_over = False
        self._last_progress = time.time()
        self._last_wait = (0.0, time.monotonic())
        self._wait_share: float | None = None
        self._job = identity.job_id()
        self._topology = identity.Topology()
        self._pid = os.getpid()
        self._host = socket.gethostname()

    def start(self) -> None:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self._optimizer_hook = register_optimizer_step_post_hook(self.progress.on_optimizer_step)
        if dist.is_available():
            self._p2p.install()
            _quietly(self._groups.baseline, None)
        self._loaders.install()
        self._last_words.install()
        self._ray_errors.install()
        self._leaving.install()
        self._termination.install()
        if os.environ.get(TRACER_ENV, "").isdigit():  # the monitor may take this rank's stack
            allow_tracer(int(os.environ[TRACER_ENV]))
        stacksignal.arm()  # where it may not be traced: its threads' stacks on a signal
        self._started = time.monotonic()
        self._thread.start()
        self._pace.start()

    def stop(self) -> None:
        """Send a final report and close; idempotent, bounded in time."""
        if self._optimizer_hook is not None:
            self._optimizer_hook.remove()
            self._optimizer_hook = None
        self._loaders.uninstall()
        self._p2p.uninstall()
        self._last_words.uninstall()
        self._ray_errors.uninstall()
        self._leaving.uninstall()
        stacksignal.disarm()
        self._pace.stop()
        self._stopping = True
        self._wake()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=LAST_WORDS_WAIT + EXIT_LINGER_MS / 1000)
        # Only now: a SIGTERM while the last words are still on their way out (the launcher tears
        # the others down a moment after this rank raised) waits for them, then kills as before.
        self._termination.uninstall()
        if not self._thread.is_alive() and self._wake_write >= 0:
            os.close(self._wake_read)
            os.close(self._wake_write)
            self._wake_read = self._wake_write = -1
            self._termination.close()

    @property
    def dropped(self) -> int:
        """Reports not sent because no monitor was connected or it was too slow."""
        return self._dropped

    def _report_exception(self, info: ExceptionInfo) -> None:
        if os.getpid() != self._pid:
            return  # a forked child (a DataLoader worker): the agent is its parent's
        self._exception = info
        self._send_now()

    def _trains(self, thread: threading.Thread) -> bool:
        return bool(_quietly(lambda: self.training.trains(thread, self.progress), False))

    def _report_interrupt(self) -> None:
        if os.getpid() == self._pid:
            self._exit = ExitInfo(how=INTERRUPTED, t=time.time())

    def _report_exit(self) -> None:
        if os.getpid() != self._pid:
            return
        if self._exit is None:
            self._exit = ExitInfo(how="exception" if self._exception else "clean", t=time.time())
        self.stop()

    def say_goodbye(self) -> None:
        """The rank left its process group, its training done while its process stays (see
        :meth:`TrainingThread.done_with_the_group`): one last report says so, and the agent
        stops, so that however the launcher then ends the process (Ray Train kills its
        workers) is no loss."""
        if os.getpid() != self._pid or self._exit is not None or not self.training.done_with_the_group():
            return
        self._exit = ExitInfo(how="exception" if self._exception else FINISHED, t=time.time())
        self._stopping = True
        self._send_now()

    def _send_now(self) -> None:
        """Wake the agent and wait (bounded) until it has sent a fresh report."""
        if not self._thread.is_alive():
            return
        with self._sent:
            target = self._reports + 1
            self._wake()
            self._sent.wait_for(lambda: self._reports >= target, timeout=LAST_WORDS_WAIT)

    def _run(self) -> None:
        try:
            self._report_until_stopped()
        finally:
            self._termination.agent_ended.set()

    def _report_until_stopped(self) -> None:
        context = zmq.Context(io_threads=1)
        sock = context.socket(RANK_SOCKET)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.IMMEDIATE, 1)
        sock.setsockopt(zmq.SNDHWM, SEND_HWM)
        if self._key is not None:
            keys.as_client(sock, self._key)
        try:
            sock.connect(self.endpoint)
        except zmq.ZMQError as e:
            print(f"distmon: not monitoring this rank: cannot connect to {self.endpoint}: {e}", file=sys.stderr)
            sock.close(linger=0)
            context.term()
            return
        try:
            while True:
                stopping = self._stopping
                self._send(sock)
                stacksignal.keep()
                if stopping:
                    break
                self._sleep(sock)
                if self._termination.terminated():
                    self._exit = ExitInfo(how=TERMINATED, t=time.time())
                    self._stopping = True
                elif self._exit is None and self.training.ended(self.progress.thread):
                    self._exit = ExitInfo(how="exception" if self._exception else FINISHED, t=time.time())
                    self._stopping = True
        except Exception:
            pass  # the monitor must never take the rank down with it
        finally:
            sock.close(linger=EXIT_LINGER_MS)
            context.term()
        if self._exit is not None and self._exit.how in (TERMINATED, ENDED):
            self._termination.die()

    def _wake(self) -> None:
        if self._wake_write >= 0:
            with contextlib.suppress(OSError):
                os.write(self._wake_write, b"!")

    def _sleep(self, sock: zmq.Socket[bytes]) -> None:
        """Until the interval passes, someone wakes the agent, a signal or a command arrives,
        or, while no report has gone, the monitor connects (ZeroMQ then takes a message: with
        ``IMMEDIATE``, not before): a monitor started after the rank hears from it at once."""
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN if self._delivered else zmq.POLLIN | zmq.POLLOUT)
        for fd in (self._wake_read, self._termination.fd):
            if fd is not None:
                poller.register(fd, zmq.POLLIN)
        ready = dict(poller.poll(int(self.interval * 1000)))
        if self._wake_read in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_read, 4096)
        if ready.get(sock, 0) & zmq.POLLIN:
            self._obey(sock)

    def _obey(self, sock: zmq.Socket[bytes]) -> None:
        """Carry out the monitor's commands for this rank (see :mod:`distmon.wire.sockets`)."""
        while True:
            try:
                data = sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            try:
                command = decode_command(data)
            except WireError:
                continue
            rank, _, _ = self._topology()
            if not command.concerns(self._job, rank):
                continue
            if command.action == DUMP:
                dump = _quietly(lambda: self._groups.trace_dump(MAX_DUMP_MESSAGE_BYTES), None)
                if dump is not None:
                    with contextlib.suppress(zmq.Again):
                        sock.send_multipart(dump_frames(Dump(self._job, rank, command.request, dump)), zmq.NOBLOCK)
            elif command.action == END and self._exit is None:
                print(f"distmon: ending rank {rank}: {command.reason}", file=sys.stderr, flush=True)
                self._exit = ExitInfo(how=ENDED, t=time.time())
                self._stopping = True

    def _send(self, sock: zmq.Socket[bytes]) -> None:
        try:
            data = encode(self.sample())
        except Exception:
            data = None
        if data is not None:
            grace = CONNECT_GRACE - (time.monotonic() - self._started)
            if grace > 0:
                sock.poll(int(grace * 1000), zmq.POLLOUT)
            try:
                sock.send(data, zmq.NOBLOCK)
                self._delivered = True
            except zmq.Again:
                self._dropped += 1
        with self._sent:
            self._reports += 1
            self._sent.notify_all()

    def sample(self) -> Report:
        now = time.time()
        progress = self.progress
        groups = _quietly(self._groups.read, [])
        p2p = _quietly(self._groups.read_p2p, [])
        self._say_if_over(len(groups), len(p2p))
        marker = (progress.steps, progress.forwards, *(g.completed for g in groups), *(c.completed for c in p2p))
        if marker != self._last_marker:
            self._last_marker = marker
            self._last_progress = now
        step_time = progress.step_stats()
        self._pace.median = step_time.p50 if step_time and step_time.n >= MIN_STEPS else None
        stalled = now - self._last_progress >= stall_after(step_time.p50 if step_time else None) and self._exit is None
        rank, world, backend = self._topology()
        trainer = _quietly(lambda: self.training.current(progress), None)
        return Report(
            job=self._job,
            rank=rank,
            world=world,
            host=self._host,
            pid=self._pid,
            t=now,
            n=self._reports,
            interval=self.interval,
            local_rank=identity.local_rank(),
            torch=torch.__version__,
            backend=backend,
            steps=progress.steps,
            forwards=progress.forwards,
            last_step_t=progress.last_step_time(),
            step_time=step_time,
            pace=self._pace.pace,
            data_wait=self._data_wait_share(),
            groups=groups,
            p2p=p2p,
            stalled_since=self._last_progress if stalled else None,
            stack=_quietly(lambda: thread_stack(trainer.ident if trainer else None), None) if stalled else None,
            memory=_quietly(host_memory, None),
            usage=_quietly(self._usage.read, None),
            gpu=_quietly(self._gpu.read, None),
            loaders=_quietly(lambda: self._loaders.read(self._last_progress if stalled else None), []),
            exception=self._exception,
            exit=self._exit,
            thread=trainer.ident if trainer else None,
            tid=trainer.native_id if trainer else None,
            reporter=self._thread.native_id,
        )

    def _say_if_over(self, groups: int, channels: int) -> None:
        """Once, on the rank's stderr: more groups or channels than a frame carries (the
        monitor follows the first of each), rather than leaving the rest unseen in silence."""
        if self._said_over or (groups <= MAX_ROWS and channels <= MAX_ROWS):
            return
        self._said_over = True
        print(
            f"distmon: this rank has {groups} process groups and {channels} point-to-point channels; the "
            f"monitor follows the first {MAX_ROWS} of each (a report's limit), a hang in the others is not seen",
            file=sys.stderr,
        )

    def _data_wait_share(self) -> float | None:
        """Share of wall time spent in DataLoader ``__next__`` since the last full interval.

        A report sent early (an exception, the exit) keeps the last share: a few
        milliseconds are no measure.
        """
        waited, since = self._last_wait
        now = time.monotonic()
        total = self.progress.data_wait
        if total == 0.0:
            return None
        if now - since >= self.interval / 2:
            self._last_wait = (total, now)
            self._wait_share = min(1.0, (total - waited) / (now - since))
        return self._wait_share


def _quietly(read: Any, default: Any) -> Any:
    """Run one sampler; a failing one leaves its field empty rather than the report."""
    with contextlib.suppress(Exception):
        return read()
    return default
