"""A rank's last words: its uncaught exception and its exit, reported before it dies.

torchrun sends SIGTERM to the surviving ranks a fraction of a second after the first one
fails, so the failing rank must report from inside its own ``sys.excepthook``; where the
rank trains in a thread of its own (a notebook's launcher, a framework's worker thread), from
inside ``threading.excepthook`` for that thread: its exception ends the rank's training.
"""

from __future__ import annotations

import atexit
import sys
import threading
import time
import traceback
from collections.abc import Callable
from types import TracebackType

from distmon.wire import ExceptionInfo, StackFrame

MAX_TRACEBACK = 40
MAX_MESSAGE = 4000


def exception_info(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> ExceptionInfo:
    frames = [
        StackFrame(file=f.filename, line=f.lineno or 0, func=f.name, code=f.line or None)
        for f in traceback.extract_tb(tb)
    ][-MAX_TRACEBACK:]
    message = str(exc)
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE] + "…"
    return ExceptionInfo(
        type=exc_type.__qualname__,
        message=message,
        where=frames[-1] if frames else None,
        traceback=frames,
        t=time.time(),
    )


class LastWords:
    """Chains onto ``sys.excepthook``, ``threading.excepthook`` (for the thread that trains,
    as ``trains`` tells) and ``atexit``; the callbacks must not raise."""

    def __init__(
        self,
        on_exception: Callable[[ExceptionInfo], None],
        on_exit: Callable[[], None],
        on_interrupt: Callable[[], None],
        trains: Callable[[threading.Thread], bool],
    ) -> None:
        self._on_exception = on_exception
        self._on_exit = on_exit
        self._on_interrupt = on_interrupt
        self._trains = trains
        self._previous_hook = sys.excepthook
        self._previous_thread_hook = threading.excepthook

    def install(self) -> None:
        self._previous_hook = sys.excepthook
        sys.excepthook = self._excepthook
        self._previous_thread_hook = threading.excepthook
        threading.excepthook = self._thread_excepthook
        atexit.register(self._on_exit)

    def uninstall(self) -> None:
        if sys.excepthook == self._excepthook:
            sys.excepthook = self._previous_hook
        if threading.excepthook == self._thread_excepthook:
            threading.excepthook = self._previous_thread_hook
        atexit.unregister(self._on_exit)

    def _excepthook(self, exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        try:
            if issubclass(exc_type, KeyboardInterrupt):
                self._on_interrupt()  # a person's Ctrl-C: an exit, not a failure
            else:
                self._on_exception(exception_info(exc_type, exc, tb))
        finally:
            self._previous_hook(exc_type, exc, tb)

    def _thread_excepthook(self, args: threading.ExceptHookArgs) -> None:
        """Another thread's exception is the rank's only when that thread trains; ``SystemExit``
        ends a thread quietly, as Python itself has it."""
        try:
            thread, value = args.thread, args.exc_value
            if thread is not None and value is not None and args.exc_type is not SystemExit and self._trains(thread):
                self._on_exception(exception_info(args.exc_type, value, args.exc_traceback))
        finally:
            self._previous_thread_hook(args)
