"""How launchers say a worker ended, as data: what a launcher's number counts (a global rank, a
local rank, an srun task, a pid), the signals, each launcher's one-line words (:data:`ENDS`), and
the exit itself (:class:`WorkerExit`). :mod:`~distmon.forensics.launcher_lines` reads them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from distmon.forensics.tracebacks import Raised

SIGABRT = -6
"""torchrun's exit code of a rank its own watchdog aborted: a timeout's consequence, not a cause."""


SIGTERM = -15
"""torchrun's exit code of a rank it tore down after another failed."""


SIGBUS = -7
"""A bus error: a mapped page with nothing behind it, most often shared memory (/dev/shm) run out on
the node, which its processes share: no proof of a fault of the process's own."""


TEARDOWN = frozenset({SIGABRT, SIGTERM})


RANK = "rank"


LOCAL_RANK = "local rank"


TASK = "task"


PROCESS = "process"


SPAWNED = "spawned process"


WORKER = "worker"
"""What a launcher's number counts: a global rank, a rank on its node, an srun task, a pid, the
index ``mp.spawn`` gave a process, or nothing (a worker the launcher does not name)."""


OOM_KILLER = "the kernel's OOM killer"
"""Who says it killed a process (its pid) for the host's memory, in ``dmesg``'s words."""


ON_A_NODE = (LOCAL_RANK, TASK, SPAWNED)
"""Units that are the rank where the job ran on one node (a task: where srun started one a rank)."""


MAX_TASKS = 1 << 17
"""Tasks srun's lines in one log may name: more is no real job's."""


SELF = "the launcher itself signalled"
"""How a launcher's worker ended where the launcher was itself sent a signal and ended its workers."""


SIGNAL_NAMES = {
    1: "SIGHUP",
    4: "SIGILL",
    6: "SIGABRT",
    7: "SIGBUS",
    8: "SIGFPE",
    9: "SIGKILL",
    11: "SIGSEGV",
    15: "SIGTERM",
}


SHELL_SIGNALS = 128
"""A shell reports a child a signal ended as 128 plus the signal: exit status 139 is SIGSEGV."""


@dataclass(frozen=True)
class Words:
    """One launcher's one-line word on how its workers ended, as data: the literal a line must hold,
    the pattern that reads it (``who``, ``code``, a list of ``ranks`` out of a ``total``), what its
    number counts, and whether the launcher names the first failure it saw."""

    by: str
    key: str
    pattern: re.Pattern[str]
    unit: str = RANK
    first: bool = False
    said: str | None = None
    """How the worker ended, in the launcher's words, where it gives no code; what the line says after
    them (its ``why``), where it says more."""
    aborted: bool = False
    """The worker ended the job itself (``MPI_Abort``)."""
    joins: bool = False
    """Its message may break over two lines (a help text's)."""
    code: int | None = None
    """The exit code the words mean where they give none (the OOM killer's SIGKILL)."""


ENDS = (
    Words(
        "horovodrun",
        "exit with status code",
        re.compile(r"\bProcess (?P<who>\d{1,9}) exit with status code (?P<code>-?\d{1,9})\."),
    ),
    Words(
        "Paddle's launcher",
        "trainer process with rank",
        re.compile(
            r"Out of all (?P<total>\d{1,9}) trainers, the trainer process with rank=\[(?P<ranks>[\d, ]{1,4000})\] "
            r"was aborted"
        ),
        first=True,
        said="was aborted (its own log says why)",
    ),
    Words(
        "Paddle's launcher",
        "status failed",
        re.compile(r"\bContainer rank (?P<who>\d{1,9}) status failed cmd .{0,4000}? code (?P<code>-?\d{1,9}) log"),
        first=True,
    ),
    Words(
        "Ray Train",
        "has failed",
        re.compile(r"\bWorker (?P<who>\d{1,9}) has failed\."),
        first=True,
        said="failed (its process died or its function raised: Ray Train does not say which)",
    ),
    Words(
        "MPICH",
        "MPI_Abort(",
        re.compile(r"called MPI_Abort\([^()]{1,100}?, ?(?P<code>-?\d{1,9})\) - process (?P<who>\d{1,9})"),
        first=True,
        aborted=True,
    ),
    Words(
        "Open MPI",
        "MPI_ABORT was invoked",
        re.compile(
            r"MPI_ABORT was invoked on rank (?P<who>\d{1,9}) in communicator .{1,200}?\s{1,8}with errorcode "
            r"(?P<code>-?\d{1,9})"
        ),
        first=True,
        aborted=True,
        joins=True,
    ),
    Words(
        "Intel MPI",
        ") on node ",
        re.compile(r"\bAbort\((?P<code>-?\d{1,9})\) on node \d{1,9} \(rank (?P<who>\d{1,9}) in comm 0\)"),
        first=True,
        aborted=True,
    ),
    Words(
        "Kubernetes",
        "OOMKilled",
        re.compile(r"(?:^\s{0,8}(?P<host>[a-z0-9][a-z0-9.-]{0,252})\s{1,40}\d{1,3}/\d{1,3}\s{1,40})?\bOOMKilled\b"),
        unit=WORKER,
        said="OOMKilled (its container's memory limit)",
    ),
    Words(
        "vLLM's executor",
        "died unexpectedly",
        re.compile(r"\bWorker proc VllmWorker-(?P<who>\d{1,9}) died unexpectedly"),
        first=True,
        said="died unexpectedly (vLLM's executor saw its process end first and shut the others down)",
    ),
    Words(
        OOM_KILLER,
        "Killed process",
        re.compile(r"\b(?:Out of memory|Memory cgroup out of memory): Killed process (?P<who>\d{1,9}) \("),
        unit=PROCESS,
        code=-9,
    ),
    Words(
        "kubectl",
        "command terminated with exit code",
        re.compile(r"\bcommand terminated with exit code (?P<code>\d{1,3})\b"),
        unit=WORKER,
    ),
    Words(
        "SageMaker",
        "ExecuteUserScriptError",
        re.compile(r"ExecuteUserScriptError:.{0,200}?ExitCode (?P<code>\d{1,3})\b"),
        unit=WORKER,
    ),
    Words(
        "TensorRT-LLM's executor",
        "Failed to initialize executor on rank",
        re.compile(r"\bFailed to initialize executor on rank (?P<who>\d{1,9})\b:? ?(?P<why>\S.{0,300})?"),
        first=True,
        said="failed to initialize its executor",
    ),
    Words(
        "Composer's launcher",
        "crashed with exit code",
        re.compile(r"\bRank (?P<who>\d{1,9}) crashed with exit code (?P<code>-?\d{1,9})\b"),
        first=True,
    ),
    Words(
        "Composer's launcher",
        "Killing global rank",
        re.compile(r"\bKilling global rank (?P<who>\d{1,9}) \(PID \d{1,12}\) with SIGTERM"),
        code=-15,
    ),
    Words(
        "the launcher",
        "ank",
        re.compile(
            r"\b[Rr]ank[ :=#]{0,3}(?P<who>\d{1,9})\b[^\n]{0,60}?\b(?:exited|terminated|failed|died)\b[^\n]{0,40}?"
            r"\b(?:exit ?code|exit status|return code|status code)[ :=]{0,3}(?P<code>-?\d{1,9})"
        ),
    ),
    Words(
        "pdsh",
        "ssh exited with exit code",
        re.compile(r"pdsh@[\w.-]{1,200}: (?P<host>[\w.-]{1,200}): ssh exited with exit code (?P<code>\d{1,3})"),
        unit=WORKER,
    ),
)
"""The launchers' one-line words on their workers' ends (Horovod's gloo launcher, Paddle's ``launch_utils.py`` and
its controller's ``Container failed``, Ray Train's ``check_for_failure``, MPICH's, Open MPI's and Intel MPI's
``MPI_Abort``, a Kubernetes container killed for its memory limit, vLLM's multiprocess executor, the kernel's OOM
killer (``dmesg``), ``kubectl exec``, SageMaker's user script, TensorRT-LLM's executor on the rank that could not
start it, Composer's launcher on the first rank it polled found ended non-zero (``composer/cli/launcher.py``), any
launcher's sentence that a rank exited with a code, pdsh under DeepSpeed's multi-node runner), read anywhere in a
line whatever a collector put before it."""


@dataclass
class WorkerExit:
    """How a launcher says one of its workers ended."""

    unit: str
    """What :attr:`who` counts: :data:`RANK`, :data:`LOCAL_RANK`, :data:`TASK` or :data:`PROCESS`."""
    who: int
    code: int | None
    """The exit code; negative where a signal ended it (its number)."""
    by: str
    """The launcher that said so."""
    at: float | None = None
    host: str | None = None
    first: bool = False
    """The launcher's first observed failure (torchrun's root cause, mpirun's first process)."""
    signal: str | None = None
    raised: Raised | None = None
    """The exception, where torchrun's table holds its traceback."""
    said: str | None = None
    """How it ended in the launcher's words, where it gives no code (``called MPI_Abort``)."""
    aborted: bool = False
    """It ended the job itself (``MPI_Abort``): a failure of its own, whatever its code."""
    count: int = 1
    """How many workers the line says ended so, where it names none (mpirun's count)."""
    pid: int | None = None
    """Its process id, where the launcher gives it (torchrun's): the kernel's OOM killer names the pid it killed."""

    @property
    def how(self) -> str:
        """``exit code 1``, ``signal 9 (SIGKILL)``, ``exit code 139 (signal 11, SIGSEGV)``, or the
        launcher's words."""
        if self.code is None and self.said is not None:
            return self.said
        if self.aborted and self.code is not None:
            return f"MPI_Abort with error code {self.code}"
        number = self.signal_number
        if self.code is None or number is None:
            return f"exit code {self.code}"
        name = self.signal or SIGNAL_NAMES.get(number)
        if self.code > 0:
            return f"exit code {self.code} (signal {number}" + (f", {name})" if name else ")")
        return f"signal {number}" + (f" ({name})" if name else "")

    @property
    def signal_number(self) -> int | None:
        """The signal that ended it: its negative code, or a code a shell reports a signal by (128 more)."""
        if self.code is None or self.code == 0:
            return None
        if self.code < 0:
            return -self.code
        return self.code - SHELL_SIGNALS if SHELL_SIGNALS < self.code <= SHELL_SIGNALS + 31 else None

    @property
    def ended(self) -> str:
        """How it ended, alike however its launcher says it (exit status 139 and SIGSEGV are one)."""
        number = None if self.aborted else self.signal_number
        if number is None:
            return self.how
        return f"signal {number}" + (f" ({SIGNAL_NAMES[number]})" if number in SIGNAL_NAMES else "")

    @property
    def killed(self) -> bool:
        """Ended by a signal that is not the launcher's own teardown nor a watchdog's abort."""
        return self.code is not None and self.code < 0 and self.code not in TEARDOWN

    def failure(self, timed_out: bool) -> Raised | None:
        """The exit as the rank's last words: the exception the table holds, or the signal that
        killed it, or its exit code. None for a rank its own watchdog aborted or the launcher
        tore down, or one that timed out like its peers and left only an exit code: the
        launcher observed it first, no more; nor for a bus error (:data:`SIGBUS`), suspected."""
        if self.raised is not None:
            return self.raised
        if self.aborted and self.first and not timed_out and self.code != 0:
            said = f"it ended the job itself: {self.by}'s first observed failure"
            return Raised("MPI_Abort", said, [], self.at, launcher=self.by)
        if timed_out or self.code is None or self.code == 0 or self.code in TEARDOWN or self.code == SIGBUS:
            return None
        said = f"killed: {self.by}'s first observed failure" if self.first else f"killed, as {self.by} says"
        if self.code < 0:
            kind = f"Signal {-self.code} ({self.signal or SIGNAL_NAMES.get(-self.code, '?')})"
            return Raised(kind, said, [], self.at, launcher=self.by)
        said = f"exit code {self.code}, {self.by}'s first observed failure (its traceback not in the log)"
        return Raised("Exception", said, [], self.at, launcher=self.by)
