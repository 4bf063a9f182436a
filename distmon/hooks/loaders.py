"""DataLoader worker processes and the time the training loop waits for data.

Every multi-process DataLoader iterator created after :func:`LoaderWatch.install` is
registered (weakly), so no argument is needed. Workers are inspected with
``waitid(WNOWAIT)``: a dead worker is seen without reaping it, which would rob
PyTorch's own SIGCHLD check of the exit status it reports.

When a worker is killed, PyTorch raises in the training thread and shuts the iterator
down, reaping its workers, often before the next sample. So the shutdown is intercepted
too: an iterator that ends with a dead worker is kept in the report (the last few only).

While the training loop waits in ``next()``, the iterator says which batch it waits for and
which worker owes it; once the rank has stalled, that worker's stack is taken with py-spy
(the rank is its parent, so may trace it), once per stall, on a thread of its own.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
import time
import weakref
from collections import deque
from typing import Any

import psutil
from torch.utils.data import dataloader

from distmon.hooks.progress import Counters
from distmon.node.pyspy import StackTaker, allow_tracer, yama_scope
from distmon.wire import Loader, Worker

CRASHED_KEPT = 4
_tracing_children = False


class LoaderWatch:
    def __init__(self, progress: Counters) -> None:
        self._progress = progress
        self._iterators: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._processes: dict[int, psutil.Process] = {}
        self._deaths: dict[int, Worker] = {}
        self._originals: dict[str, Any] = {}
        self._crashed: deque[Loader] = deque(maxlen=CRASHED_KEPT)
        self._stacks = StackTaker()

    def install(self) -> None:
        mp_iter, base_iter = (
            dataloader._MultiProcessingDataLoaderIter,
            dataloader._BaseDataLoaderIter,
        )
        if self._originals:
            return
        _let_this_process_trace_its_children()
        self._originals = {
            "init": mp_iter.__init__,
            "next": base_iter.__next__,
            "shutdown": mp_iter._shutdown_workers,
        }
        original_init, original_next = self._originals["init"], self._originals["next"]
        original_shutdown = self._originals["shutdown"]
        progress, iterators, lock = self._progress, self._iterators, self._lock
        keep_if_crashed = self._keep_if_crashed

        def __init__(it: Any, *args: Any, **kwargs: Any) -> None:
            original_init(it, *args, **kwargs)
            with lock:
                iterators.add(it)

        def __next__(it: Any) -> Any:
            start = it._distmon_waiting = time.perf_counter()
            try:
                return original_next(it)
            finally:
                it._distmon_waiting = None
                progress.data_wait += time.perf_counter() - start

        def _shutdown_workers(it: Any) -> None:
            if not getattr(it, "_shutdown", True):
                keep_if_crashed(it)
            original_shutdown(it)

        mp_iter.__init__ = __init__
        base_iter.__next__ = __next__
        mp_iter._shutdown_workers = _shutdown_workers

    def uninstall(self) -> None:
        if self._originals:
            dataloader._MultiProcessingDataLoaderIter.__init__ = self._originals["init"]
            dataloader._BaseDataLoaderIter.__next__ = self._originals["next"]
            dataloader._MultiProcessingDataLoaderIter._shutdown_workers = self._originals["shutdown"]
            self._originals = {}

    def read(self, stalled_since: float | None = None) -> list[Loader]:
        """Every live iterator; with ``stalled_since``, the stack of the worker each one waits on."""
        with self._lock:
            iterators = list(self._iterators)
        loaders = list(self._crashed)
        live_pids: set[int] = set()
        for it in iterators:
            if getattr(it, "_shutdown", True):
                continue  # finished: its workers exited on purpose (between epochs)
            loader = self._describe(it)
            if stalled_since is not None:
                self._add_stack(loader, stalled_since)
            live_pids.update(w.pid for w in loader.workers)
            loaders.append(loader)
        for pid in set(self._processes) - live_pids:
            del self._processes[pid]
        for pid in set(self._deaths) - live_pids:
            del self._deaths[pid]
        return loaders

    def _describe(self, it: Any) -> Loader:
        workers = [self._worker(w.pid, i) for i, w in enumerate(list(getattr(it, "_workers", []))) if w.pid]
        loader = Loader(id=id(it), expected=it._num_workers, workers=workers)
        start = getattr(it, "_distmon_waiting", None)
        if start is not None:
            loader.waiting = it._rcvd_idx
            loader.since = time.time() - (time.perf_counter() - start)
            owed = it._task_info.get(loader.waiting)
            if owed is not None and len(owed) == 1:  # (worker id,) until the batch arrives
                loader.worker = owed[0]
        return loader

    def _add_stack(self, loader: Loader, stalled_since: float) -> None:
        """The owing worker's stack, once per stall; None in the reports while py-spy runs."""
        worker = next((w for w in loader.workers if w.id == loader.worker and w.alive), None)
        if worker is None:
            return
        taken = self._stacks.request(worker.pid, stalled_since)
        if taken is not None:
            worker.stack, worker.stack_error = taken.frames, taken.error

    def _keep_if_crashed(self, it: Any) -> None:
        """On the training thread, once per iterator shutdown: a few ``waitid`` calls."""
        with contextlib.suppress(Exception):
            loader = self._describe(it)
            if any(not w.alive and (w.signal or w.exitcode) for w in loader.workers):
                self._crashed.append(loader)

    def _worker(self, pid: int, index: int) -> Worker:
        if pid in self._deaths:
            return self._deaths[pid]
        status = _peek_exit(pid)
        if status is not None:
            status.id = index
            self._deaths[pid] = status
            return status
        rss = None
        with contextlib.suppress(psutil.Error):
            process = self._processes.get(pid) or self._processes.setdefault(pid, psutil.Process(pid))
            rss = process.memory_info().rss
        return Worker(pid=pid, alive=True, rss=rss, id=index)


def _let_this_process_trace_its_children() -> None:
    """Under Yama ``ptrace_scope`` 1 only an ancestor may trace, and py-spy, started by the
    rank, is no ancestor of the rank's DataLoader workers: so each forked child names the rank
    (and with it the rank's descendants) as its tracer. Once per process; nothing without Yama."""
    global _tracing_children
    if not _tracing_children and yama_scope() == 1:
        _tracing_children = True
        os.register_at_fork(after_in_child=functools.partial(allow_tracer, os.getpid()))


def _peek_exit(pid: int) -> Worker | None:
    """The exit status of a dead child, without reaping it; None while it runs."""
    try:
        result = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return None if _running(pid) else Worker(pid=pid, alive=False)
    if result is None or result.si_pid == 0:
        return None
    if result.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
        return Worker(pid=pid, alive=False, signal=_signal_name(result.si_status))
    return Worker(pid=pid, alive=False, exitcode=result.si_status)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
