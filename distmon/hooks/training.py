"""Which thread of the process trains: the rank, as far as a stack or a look from outside goes.

Under torchrun it is the main thread. Ray Train runs the training function in a thread of
its worker while the main thread runs Ray's event loop, and Lightning, a notebook or a
user's own launcher may do the same. The thread that trains is the one that steps the
optimizer or calls the model's forward (the counters note it, :mod:`distmon.hooks.progress`),
else the one that called :func:`distmon.hooks.attach`. When that thread is not the main one,
its end is the end of the rank's training: the training function returned (or raised), and
the launcher may then end the process however it likes.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch.distributed as dist

from distmon.hooks.progress import Counters


@dataclass(frozen=True)
class Trainer:
    """The training thread as a report names it."""

    ident: int
    """``threading.get_ident()``: the key of ``sys._current_frames()``."""
    native_id: int | None
    """``threading.get_native_id()``: the kernel's id, ``/proc/PID/task/TID``, py-spy's ``os_thread_id``."""


class TrainingThread:
    """The thread that attached, and the one seen training, told apart from the others."""

    def __init__(self) -> None:
        self._attached = threading.current_thread()
        self._stepper: tuple[int, threading.Thread | None, int] | None = None
        """The ident seen stepping, its thread (resolved while it runs) and the count of steps
        and forwards then."""

    def claim(self) -> None:
        """The calling thread attached: it trains, unless another is seen stepping."""
        self._attached = threading.current_thread()

    def current(self, progress: Counters) -> Trainer | None:
        """The training thread now: the one that last stepped or ran a forward, else the one
        that attached; None once it has ended."""
        thread = self._thread(progress)
        if thread is None or thread.ident is None or not thread.is_alive():
            return None
        return Trainer(thread.ident, thread.native_id)

    def trains(self, thread: threading.Thread, progress: Counters) -> bool:
        """Whether ``thread`` is the training thread, as :meth:`current` has it."""
        return thread is self._thread(progress)

    def _thread(self, progress: Counters) -> threading.Thread | None:
        """The thread that last stepped, else the one that attached. An ident is a thread's only
        while it runs (the next thread started often gets it), so it is resolved to its thread
        while that runs (by the sampler or, at the latest, by the thread's own last words), and
        again only once the thread has ended and the ident steps anew: a thread started after
        the training thread ended is not it until it trains."""
        stepped, moves = progress.thread, progress.steps + progress.forwards
        if stepped is None:
            return self._attached
        known = self._stepper
        if known is None or known[0] != stepped or (known[2] != moves and not (known[1] and known[1].is_alive())):
            known = (stepped, next((t for t in threading.enumerate() if t.ident == stepped), None), moves)
            self._stepper = known
        return known[1]

    def done_with_the_group(self) -> bool:
        """Whether the rank leaving its process group now ends its training: it trains in a
        thread of its own (under torchrun the main thread trains, and the process's own exit
        says how it ended), and that thread leaves itself or has ended. Not while it still runs
        and another thread tears the rank down around it (Ray Train destroys the process group
        of every worker once one of them failed)."""
        attached = self._attached
        if attached is threading.main_thread():
            return False
        return attached is threading.current_thread() or not attached.is_alive()

    def ended(self, stepped: int | None) -> bool:
        """The thread that attached, not the main thread and not one that only set up while
        another trains (``stepped``), has ended: its training function returned or raised."""
        attached = self._attached
        if attached is threading.main_thread() or stepped not in (None, attached.ident):
            return False
        return not attached.is_alive()


class LeavingWatch:
    """Calls ``on_leave`` once the rank destroys its default process group: it has left the
    job (Ray Train does so for its workers once their training function returns, scripts
    at their end), and what its process does after is no longer the job's."""

    def __init__(self, on_leave: Callable[[], None]) -> None:
        self._on_leave = on_leave
        self._modules: list[Any] = []
        self._original: Any = None

    def install(self) -> None:
        if not dist.is_available() or self._modules:
            return
        from torch.distributed import distributed_c10d

        original = distributed_c10d.destroy_process_group
        on_leave = self._on_leave

        @functools.wraps(original)
        def destroy_process_group(group: Any = None) -> Any:
            result = original(group)
            if group is None or group is distributed_c10d.GroupMember.WORLD:
                with contextlib.suppress(Exception):
                    on_leave()
            return result

        self._modules, self._original = [dist, distributed_c10d], original
        for module in self._modules:
            module.destroy_process_group = destroy_process_group

    def uninstall(self) -> None:
        for module in self._modules:
            module.destroy_process_group = self._original
        self._modules = []
