"""Last words on SIGTERM, which torchrun sends to every surviving rank after one fails.

Without them, the ranks torn down by torchrun go silent at the same moment as the rank
that really died, and nobody can tell which was first. Python runs signal handlers only
on the main thread between bytecodes, and a rank torn down is usually blocked in a
collective; so the handler is only a trigger: CPython's C-level handler writes the signal
number to a wakeup pipe at once, the agent thread reads it, sends its report, restores
the default disposition and re-raises SIGTERM, so the process dies of it as before.

Installed only from the main thread, only when SIGTERM has no handler and no wakeup fd is
set (asyncio's, say); undone in forked children (DataLoader workers), which must not
write into their parent's pipe.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
from types import FrameType

_SIG_DFL = 0
PATIENCE = 3.0
"""Seconds the main thread, in the SIGTERM handler before the agent has sent its last words and
ended the process, waits for the agent before it dies itself (at once where the agent has ended).
On an idle machine the agent is done within milliseconds; a loaded one (a CI run beside CPU
burners) can stretch its send and linger past a second, and a rank torn down without last words
reads as killed, a second culprit beside the rank that died first. Far under torchrun's 30 s
before its SIGKILL."""


class TerminationWatch:
    def __init__(self) -> None:
        self.fd: int | None = None
        self._write_fd: int | None = None
        self._owner = os.getpid()
        self.agent_ended = threading.Event()
        """Set by the agent thread as it ends: past it, nobody will send last words."""

    def install(self) -> bool:
        if threading.current_thread() is not threading.main_thread():
            return False
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return False
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        if previous != -1:
            signal.set_wakeup_fd(previous)
            os.close(read_fd)
            os.close(write_fd)
            return False
        signal.signal(signal.SIGTERM, self._python_handler)
        self.fd, self._write_fd = read_fd, write_fd
        os.register_at_fork(after_in_child=self._forget_in_child)
        return True

    def uninstall(self) -> None:
        if self.fd is None or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) == self._python_handler:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self._release_wakeup_fd()

    def close(self) -> None:
        """Close the pipe, once the agent thread no longer reads it."""
        for fd in (self.fd, self._write_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.fd = self._write_fd = None

    def terminated(self) -> bool:
        """Drain the wakeup pipe; True if SIGTERM arrived and is still ours to handle (a
        handler the script installed since, a framework's graceful shutdown, wins)."""
        if self.fd is None:
            return False
        try:
            data = os.read(self.fd, 4096)
        except OSError:
            return False
        return signal.SIGTERM in data and self._ours()

    def _release_wakeup_fd(self) -> None:
        """Unset the wakeup fd if it is still ours; someone else's is put back."""
        with contextlib.suppress(ValueError):
            previous = signal.set_wakeup_fd(-1)
            if previous != self._write_fd:
                signal.set_wakeup_fd(previous)

    def _ours(self) -> bool:
        return signal.getsignal(signal.SIGTERM) == self._python_handler

    @staticmethod
    def die() -> None:
        """Die of SIGTERM as if no handler had been installed, from any thread: raised to this thread
        (``raise()``), which takes it at once, not sent to the process, which the kernel may hand to
        another; exit as a shell reports the signal where even that did not end the process."""
        with contextlib.suppress(Exception):
            ctypes.CDLL(None).signal(signal.SIGTERM, _SIG_DFL)
            signal.raise_signal(signal.SIGTERM)
        os._exit(128 + signal.SIGTERM)

    def _python_handler(self, _signum: int, _frame: FrameType | None) -> None:
        """The main thread got here before the agent finished: give it a moment, then die."""
        self.agent_ended.wait(PATIENCE)
        self.die()

    def _forget_in_child(self) -> None:
        if os.getpid() == self._owner or self.fd is None:
            return
        self._release_wakeup_fd()
        with contextlib.suppress(Exception):
            if self._ours():
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
        self.fd = self._write_fd = None
