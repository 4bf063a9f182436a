"""Processes a test starts in a session of their own, and ends with every process they started.

In a new session a launcher (torchrun, ``distmon run``, a shell) leads a process group of its
own, apart from the test's: a signal to the group reaches it and what it runs, and never
pytest. torchrun starts each rank in a session of its own, out of that group, so ending a job
kills its descendants one by one, then the group, and reaps the leader.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil


def start(argv: Sequence[str], **options: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(argv, **options)`` in a new session; end it with :func:`kill_tree`."""
    return subprocess.Popen(list(argv), start_new_session=True, **options)


def kill_tree(process: subprocess.Popen[Any]) -> None:
    """If ``process`` (started by :func:`start`) still runs: kill it, its descendants and its
    process group, and reap it. A process that has ended is left as it is."""
    if process.poll() is not None:
        return
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(process.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                child.kill()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@contextlib.contextmanager
def session(argv: Sequence[str], **options: Any) -> Iterator[subprocess.Popen[Any]]:
    """:func:`start`, and :func:`kill_tree` on the way out, so that a failing test leaves
    nothing behind."""
    process = start(argv, **options)
    try:
        yield process
    finally:
        kill_tree(process)


def recorded_run(
    out: Path, job: Sequence[str], env: Mapping[str, str]
) -> tuple[subprocess.Popen[str], list[str], threading.Thread]:
    """``distmon run --record OUT -- JOB`` in a new session, its stderr's lines as they come, and
    the thread reading them (join it for the last lines); end it with :func:`kill_tree`."""
    process = start(
        [sys.executable, "-m", "distmon", "run", "--record", str(out), "--", *job],
        env=dict(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stderr or ()), daemon=True)
    reader.start()
    return process, lines, reader
