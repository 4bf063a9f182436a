"""Running the user's command the way a shell would, with distmon in between.

The job gets a process group of its own. While it runs it also gets the terminal, so Ctrl-C,
Ctrl-\\ and a debugger's prompt reach it exactly as if the shell had started it; signals sent
to ``distmon run`` itself (``kill``, a scheduler's SIGTERM) are forwarded to the whole group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from typing import IO, Any

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def exit_status(returncode: int) -> int:
    """A shell's exit status for a child's return code: 128 + N for death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


class Job:
    def __init__(
        self,
        argv: list[str],
        env: Mapping[str, str],
        *,
        stdin: IO[Any] | int | None = None,
        stdout: IO[Any] | int | None = None,
        terminal: bool = True,
    ) -> None:
        self.argv = argv
        self._env = dict(env)
        self._stdin = stdin
        self._stdout = stdout
        self._terminal = terminal
        self._process: subprocess.Popen[bytes] | None = None
        self._pending: list[int] = []
        """Signals that came before the command's process was known: sent as soon as it is."""

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def run(self) -> int:
        """Start the command, forward signals until it ends, return its exit status.

        Raises ``OSError`` when the command cannot be started.
        """
        with _forwarding(self._forward):
            self._process = subprocess.Popen(
                self.argv,
                env=self._env,
                stdin=self._stdin,
                stdout=self._stdout,
                stderr=subprocess.STDOUT if self._stdout is not None else None,
                preexec_fn=os.setpgrp,  # a group of its own (``process_group=0`` needs 3.11)
            )
            # a signal that came while it started (its first output may already be out) is its too
            for signum in self._pending:
                self._forward(signum, None)
            with _foreground(self._process.pid, self._terminal):
                return exit_status(self._process.wait())

    def _forward(self, signum: int, _frame: Any) -> None:
        if self._process is None:
            self._pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signum)


@contextlib.contextmanager
def _forwarding(handler: Any) -> Iterator[None]:
    previous = {signum: signal.signal(signum, handler) for signum in FORWARDED}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


@contextlib.contextmanager
def _foreground(pgid: int, wanted: bool) -> Iterator[None]:
    """Make ``pgid`` the terminal's foreground group while inside, if we hold the terminal."""
    fd = _terminal_fd() if wanted else None
    if fd is None:
        yield
        return
    _set_foreground(fd, pgid)
    try:
        yield
    finally:
        _set_foreground(fd, os.getpgrp())


def _terminal_fd() -> int | None:
    """Our terminal, if we are in its foreground group (not a pipe, not a background job)."""
    with contextlib.suppress(OSError, ValueError):
        fd = sys.stdin.fileno()
        if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():
            return fd
    return None


def _set_foreground(fd: int, pgid: int) -> None:
    """``tcsetpgrp`` from what may be a background group, which would otherwise stop us (SIGTTOU)."""
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(fd, pgid)
    finally:
        signal.signal(signal.SIGTTOU, previous)
