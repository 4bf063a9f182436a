"""torchrun's own agent, its ranks forked from a process that imported torch once: the jobs of
the tests of the hook and the monitor (``torchrun`` in tests/jobs/conftest.py).

A job that torchrun starts by exec costs each rank torch's import (about 6 CPU seconds a rank
on the 2-core test machine, the optimizer's lazy ``torch._dynamo`` included): most of a job
that ends a second after its first step. Here one process (:class:`Forker`, started once)
imports torch and the training script's imports, then for each job forks a launcher that runs
torchrun's agent (``elastic_launch``: c10d rendezvous, workers watched, the others sent SIGTERM
the moment one fails, as ``torchrun --standalone``) with ``start_method="fork"``, its ranks
forked from it. Each rank then runs its script as ``python SCRIPT ARGS`` would: the signal
dispositions of a fresh interpreter (not the agent's handlers, which it inherits), its
uncaught exception through ``sys.excepthook``, its exit handlers, its exit status. The ranks'
environment is torchrun's (``RANK``, ``WORLD_SIZE``, ``TORCHELASTIC_RUN_ID``...).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import runpy
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

from tests.support.paths import REPO

PRELOAD = ("torch", "torch.distributed", "torch.utils.data", "torch._dynamo", "torch.distributed.launcher.api")
FRESH = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
"""Signals a fresh interpreter leaves at their default, which the agent handles in itself."""


class Job:
    """One job started by a :class:`Forker`; its launcher leads a process group of its own."""

    def __init__(self, forker: Forker, log: Path) -> None:
        self._forker = forker
        self.log = log
        self.pid = int(forker.line("started"))
        self.code: int | None = None

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait(self, timeout: float) -> int:
        """The job's exit status (that of ``torchrun``: 1 when a rank failed); on timeout, the
        job is killed and the test fails with its output."""
        if self.code is None:
            try:
                self.code = int(self._forker.line("exit", timeout))
            except TimeoutError:
                self.kill()
                raise AssertionError(f"the job still runs after {timeout} s:\n{self.output[-4000:]}") from None
        return self.code

    def poll(self) -> int | None:
        """The job's exit status if it has ended, else None (as ``Popen.poll``)."""
        if self.code is None:
            with contextlib.suppress(TimeoutError):
                self.code = int(self._forker.line("exit", 0))
        return self.code

    def send_signal(self, sig: int) -> None:
        """``sig`` to the launcher (torchrun's agent), as to a ``torchrun`` a user started."""
        if self.code is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        if self.code is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            self.code = int(self._forker.line("exit", 30))

    def __enter__(self) -> Job:
        return self

    def __exit__(self, *_: object) -> None:
        self.kill()


class Forker:
    """The process that imports torch once and forks each job, one at a time; close it when done."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.forked"],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.line("ready", 300)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)

    def start(self, nproc: int, script: Path, args: list[str], env: dict[str, str], log: Path) -> Job:
        """``torchrun --standalone --nproc-per-node=NPROC SCRIPT ARGS``, ``env`` added to this
        environment, its output in ``log``."""
        assert self.process.stdin is not None
        request = {"nproc": nproc, "script": str(script), "args": args, "env": env, "log": str(log)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return Job(self, log)

    def line(self, word: str, timeout: float = 60) -> str:
        """What the forker says next, which must be ``word`` and a value; TimeoutError after
        ``timeout`` seconds of silence."""
        try:
            got, _, value = self._lines.get(timeout=timeout).strip().partition(" ")
        except queue.Empty:
            raise TimeoutError(f"the forker said no {word!r} within {timeout} s") from None
        assert got == word, (got, value)
        return value

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def _serve() -> None:
    """The forker's side: import, then fork a launcher per request and say when it ends."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    print("ready ok", flush=True)
    for request in sys.stdin:
        job = json.loads(request)
        pid = os.fork()
        if pid == 0:
            _launch(job)
        print(f"started {pid}", flush=True)
        _, status = os.waitpid(pid, 0)
        print(f"exit {os.waitstatus_to_exitcode(status)}", flush=True)


def _launch(job: dict[str, Any]) -> None:
    """In the launcher, forked: torchrun's agent for the job, its output to the job's log."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    os.setsid()
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    out = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.environ.update(job["env"])
    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=job["nproc"],
        run_id=str(uuid.uuid4()),
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",
        max_restarts=0,
        start_method="fork",
    )
    code = 0
    try:
        elastic_launch(config, _rank)(job["script"], *job["args"])
    except ChildFailedError as e:
        print(e, file=sys.stderr, flush=True)
        code = 1
    os._exit(code)


def _rank(script: str, *args: str) -> None:
    """In a rank, forked: ``python SCRIPT ARGS`` from here on, to its exit."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in FRESH:
        signal.signal(sig, signal.SIG_DFL)
    atexit._clear()  # the agent's, not the rank's
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(script)
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else int(e.code is not None)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    if code:
        os._exit(code)
    # a clean end returns to torch's wrapper: the agent counts a worker done by the value it hands
    # back, and tells it when it may exit


if __name__ == "__main__":
    _serve()
