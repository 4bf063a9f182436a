"""Finding a job's ranks on this node from outside, with nothing in the job changed: what its
launcher wrote into each process's environment (``/proc/PID/environ``) and the process tree.

A rank is a Python process its launcher gave a rank (:mod:`distmon.node.launchers`: torchrun,
``srun``, ``mpirun``, anything that sets ``RANK`` and ``WORLD_SIZE``). Its DataLoader workers
and other children inherit that environment, ``RANK`` included: a process below a rank of the
same job and rank is that rank's child, not a rank. A launcher that is a Python program
itself (torchrun's agent) has no rank of its own, or is known by name
(:data:`~distmon.node.launchers.LAUNCHERS`). Several jobs on one node are told apart by the
job id their launchers give (:func:`~distmon.node.launchers.launcher_job`), else by their
launcher (the ranks one process started).

"This node's ranks" are the processes in this process's network namespace: on a real node
every process of the host; in a Kubernetes pod the pod's own, even where the pod sees the
host's processes; in the network namespaces that stand for nodes in the tests, that node's
alone, so two relays never claim one rank.

What another user's process keeps from us (its environment, without CAP_SYS_PTRACE) is
counted, never guessed at.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from distmon.node.launchers import LAUNCHERS, entry_point, launched_rank, launcher_job, local_rank

PROC = Path("/proc")
HOST = socket.gethostname()
MAX_ENVIRON = 1 << 20
"""Bytes of a process's environment read at most."""
MAX_CMDLINE = 1 << 16
WORKER_NAME = "pt_data_worker"
"""What torch names a DataLoader worker's process (``comm``), whatever its start method."""
MAX_PROCESSES = 1 << 16
"""Processes a scan looks at, at most."""


@dataclass(frozen=True)
class Process:
    """One process as a scan saw it."""

    pid: int
    ppid: int
    started: int
    """Its start time in clock ticks since boot: a pid reused is another process."""
    name: str
    """Its ``comm`` (torch names a DataLoader worker ``pt_data_worker``)."""
    cmdline: bytes = b""
    """Its command line as the kernel keeps it: with the pid and start time, what tells the
    process before its ``exec`` (a launcher's copy) from after it (the rank)."""


@dataclass(frozen=True)
class FoundRank:
    """A rank found on this node: who its launcher said it is, and its process."""

    pid: int
    rank: int
    world: int
    local_rank: int
    job: str
    started: int
    launcher: int
    """The process that started it (torchrun's agent, ``slurmstepd``, ``prted``, ``mpirun``)."""
    workers: tuple[int, ...] = ()
    """Its DataLoader workers, by pid: its children torch named :data:`WORKER_NAME`."""


@dataclass
class Found:
    """What one scan found: the ranks of every job on this node, by job id."""

    jobs: dict[str, list[FoundRank]] = field(default_factory=dict)
    hidden: int = 0
    """Python processes whose environment could not be read (another user's, without
    CAP_SYS_PTRACE): ranks perhaps, not counted as any."""

    def job_of(self, pid: int, ancestors: Mapping[int, int]) -> str | None:
        """The job with a rank that is ``pid``, or that ``pid`` started (a launcher's pid)."""
        for job, ranks in self.jobs.items():
            for r in ranks:
                if r.pid == pid or pid in _lineage(r.pid, ancestors):
                    return job
        return None


@dataclass(frozen=True)
class _Launched:
    """What a process's launcher gave it, as far as it tells: its rank, world and local rank,
    its job, and what its command line runs."""

    rank: int | None = None
    world: int = 1
    local_rank: int = 0
    job: str | None = None
    entry: str = ""

    @property
    def a_rank(self) -> bool:
        return self.rank is not None and self.entry not in LAUNCHERS


NOT_A_RANK = _Launched()


class Finder:
    """Scans ``/proc`` for ranks; remembers what never changes (a process's environment and
    command line, by pid and start time), so a scan a second costs little."""

    def __init__(self, proc: Path = PROC) -> None:
        self._proc = proc
        self._known: dict[tuple[int, int, bytes], _Launched | None] = {}
        """Per (pid, start, command line): what its launcher gave it; None where its
        environment could not be read."""
        self._namespace = _read_link(proc / "self" / "ns" / "net")
        self.parents: dict[int, int] = {}
        """Every process's parent, as of the last scan."""

    def scan(self) -> Found:
        processes = list(_processes(self._proc))
        self.parents = {p.pid: p.ppid for p in processes}
        self._known = {key: v for key, v in self._known.items() if key[0] in self.parents}
        found = Found()
        ranks: dict[int, tuple[Process, _Launched]] = {}
        workers: dict[int, list[int]] = {}
        for p in processes:
            if p.name == WORKER_NAME:
                workers.setdefault(p.ppid, []).append(p.pid)
            launched = self._launched(p)
            if launched is None:
                found.hidden += 1
            elif launched.a_rank and p.name != WORKER_NAME:  # a worker whose rank died is no rank either
                ranks[p.pid] = (p, launched)
        for pid, (p, launched) in sorted(ranks.items()):
            above = next((ranks[a] for a in _lineage(pid, self.parents) if a in ranks), None)
            if above is not None and (above[1].rank, _job(*above)) == (launched.rank, _job(p, launched)):
                continue  # a child of that rank, with its environment
            assert launched.rank is not None
            job = _job(p, launched)
            rank = FoundRank(
                pid, launched.rank, launched.world, launched.local_rank, job, p.started, p.ppid,
                tuple(workers.get(pid, ())),
            )  # fmt: skip
            found.jobs.setdefault(job, []).append(rank)
        for ranks_of_job in found.jobs.values():
            ranks_of_job.sort(key=lambda r: r.rank)
        return found

    def _launched(self, p: Process) -> _Launched | None:
        key = (p.pid, p.started, p.cmdline)
        if key not in self._known:
            self._known[key] = self._read(p)
        return self._known[key]

    def _read(self, p: Process) -> _Launched | None:
        base = self._proc / str(p.pid)
        if not _python(base, p.cmdline) or not self._here(base):
            return NOT_A_RANK
        env = _environ(base)
        if env is None:
            return None
        argv = [os.fsdecode(a) for a in p.cmdline.split(b"\0") if a]
        launched = launched_rank(env)
        if launched is None:
            return NOT_A_RANK
        rank, world = launched
        return _Launched(rank, world, local_rank(env), launcher_job(env), entry_point(argv))

    def _here(self, base: Path) -> bool:
        """In this process's network namespace: this node's (where namespaces cannot be read,
        every process is)."""
        theirs = _read_link(base / "ns" / "net")
        return self._namespace is None or theirs is None or theirs == self._namespace


def _python(base: Path, cmdline: bytes) -> bool:
    """A Python interpreter: its executable's name, or where that may not be read (another
    user's process), its command line's first word."""
    exe = _read_link(base / "exe") or os.fsdecode(cmdline.split(b"\0")[0])
    return "python" in os.path.basename(exe)


def _job(p: Process, launched: _Launched) -> str:
    """The job's id its launcher gave, else its launcher itself: the ranks one process started."""
    return launched.job or f"{HOST}:{p.ppid}"


def _lineage(pid: int, parents: Mapping[int, int]) -> Iterable[int]:
    """The ancestors of ``pid``, its parent first."""
    seen = {pid}
    pid = parents.get(pid, 0)
    while pid > 1 and pid not in seen:
        yield pid
        seen.add(pid)
        pid = parents.get(pid, 0)


def _processes(proc: Path) -> Iterable[Process]:
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()][:MAX_PROCESSES]
    except OSError:
        return
    for entry in entries:
        stat = _read(proc / entry / "stat", 4096).decode(errors="replace")
        name, _, after = stat.partition(" (")[2].rpartition(") ")
        fields = after.split()
        if len(fields) < 20 or fields[0] in "ZX":  # a process that has ended is no rank
            continue
        yield Process(int(entry), int(fields[1]), int(fields[19]), name, _read(proc / entry / "cmdline", MAX_CMDLINE))


def _environ(base: Path) -> dict[str, str] | None:
    """The environment the process started with; None where it may not be read."""
    try:
        with open(base / "environ", "rb") as f:
            raw = f.read(MAX_ENVIRON)
    except OSError:
        return None
    pairs = (os.fsdecode(item).partition("=") for item in raw.split(b"\0") if b"=" in item)
    return {k: v for k, _, v in pairs}


def _read(path: Path, limit: int) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return b""


def _read_link(path: Path) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None
