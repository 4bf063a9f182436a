"""Ray Train's workers: a training function that raises is the rank's last words.

Ray Train runs the training function in a thread of its worker and catches what it raises
(to hand it to its controller), so neither ``sys.excepthook`` nor ``threading.excepthook``
ever sees it. The one place it passes through is the helper Ray's thread runner calls with
the exception, looked up in that module's globals at the moment it raises: wrapped while a
rank is attached, it reports the exception with its traceback into the training function,
then hands over to Ray's own. Never imports Ray: a process without it pays nothing.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

from distmon.hooks.lastwords import exception_info
from distmon.wire import ExceptionInfo

THREAD_RUNNER = "ray.train.v2._internal.execution.worker_group.thread_runner"
HELPER = "construct_user_exception_with_traceback"


class RayTrainErrors:
    """Installed in a Ray Train worker (one whose thread runner is loaded), else a no-op."""

    def __init__(self, on_exception: Callable[[ExceptionInfo], None]) -> None:
        self._on_exception = on_exception
        self._module: Any = None
        self._original: Any = None

    def install(self) -> None:
        module = sys.modules.get(THREAD_RUNNER)
        original = getattr(module, HELPER, None)
        if module is None or original is None or getattr(original, "_distmon_wrapped", False):
            return
        on_exception = self._on_exception

        def reported(e: BaseException, *args: Any, **kwargs: Any) -> Any:
            with contextlib.suppress(Exception):
                on_exception(exception_info(type(e), e, e.__traceback__))
            return original(e, *args, **kwargs)

        reported._distmon_wrapped = True  # type: ignore[attr-defined]
        setattr(module, HELPER, reported)
        self._module, self._original = module, original

    def uninstall(self) -> None:
        if self._module is not None:
            setattr(self._module, HELPER, self._original)
            self._module = self._original = None
