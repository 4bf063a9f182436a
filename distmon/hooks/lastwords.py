"""A rank's last words: its uncaught exception and its exit, reported before it dies.

torchrun sends SIGTERM to the surviving ranks a fraction of a second after the first one
fails, so the failing rank must report from inside its own ``sys.excepthook``.
"""

from __future__ import annotations

import atexit
import sys
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
    """Chains onto ``sys.excepthook`` and ``atexit``; the callbacks must not raise."""

    def __init__(
        self,
        on_exception: Callable[[ExceptionInfo], None],
        on_exit: Callable[[], None],
        on_interrupt: Callable[[], None],
    ) -> None:
        self._on_exception = on_exception
        self._on_exit = on_exit
        self._on_interrupt = on_interrupt
        self._previous_hook = sys.excepthook

    def install(self) -> None:
        self._previous_hook = sys.excepthook
        sys.excepthook = self._excepthook
        atexit.register(self._on_exit)

    def uninstall(self) -> None:
        if sys.excepthook == self._excepthook:
            sys.excepthook = self._previous_hook
        atexit.unregister(self._on_exit)

    def _excepthook(self, exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        try:
            if issubclass(exc_type, KeyboardInterrupt):
                self._on_interrupt()  # a person's Ctrl-C: an exit, not a failure
            else:
                self._on_exception(exception_info(exc_type, exc, tb))
        finally:
            self._previous_hook(exc_type, exc, tb)
