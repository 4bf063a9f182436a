"""Finding a job's ranks on this node from outside, with nothing in the job changed: what its
launcher wrote into each process's environment and command line, and the process tree.

A rank is a Python process its launcher made one:

- one its launcher gave a rank in its environment (:mod:`distmon.node.launchers`: torchrun,
  ``srun``, ``mpirun``, anything that sets ``RANK``), or on its command line (``--rank N``,
  torch's old launcher's ``--local_rank N``);
- Lightning's DDP launcher runs the user's command again for local ranks 1..n-1 with
  ``LOCAL_RANK``, ``NODE_RANK`` and ``WORLD_SIZE`` set, under local rank 0, the process the user
  started (its variables set only in its own ``os.environ``): the tree tells its rank;
- ``torch.multiprocessing.spawn`` (PyTorch's DDP tutorial) starts each rank as ``python -c
  "from multiprocessing.spawn import spawn_main ..." --multiprocessing-fork``, its index passed
  to the user's function; a process of a torch job whose rank is written nowhere its launcher
  reaches (``MASTER_ADDR`` and ``MASTER_PORT`` in its environment, no rank) is one too. Their
  rank is read off their stacks where it stands there (:mod:`distmon.node.found_ranks`: spawn's
  wrapper's index, ``init_process_group``'s arguments), else said unknown, never guessed.

A rank's DataLoader workers and other children inherit its environment, ``RANK`` included: a
process below a rank of the same job is that rank's child, not a rank. A launcher that is a
Python program itself (torchrun's agent) is known by name (:data:`~distmon.node.launchers.LAUNCHERS`).
Several jobs on one node are told apart by the job id their launchers give
(:func:`~distmon.node.launchers.launcher_job`), else by their launcher (the ranks one process
started).

"This node's ranks" are the processes in this process's network namespace: on a real node
every process of the host; in a Kubernetes pod the pod's own, even where the pod sees the
host's processes; in the network namespaces that stand for nodes in the tests, that node's
alone, so two eyes never claim one rank.

What another user's process keeps from us (its environment, without CAP_SYS_PTRACE) is
counted, never guessed at. The process table comes from psutil; what it does not bound (a
process's environment) from :mod:`distmon.node.proc`, the one reader of ``/proc`` here.
"""

from __future__ import annotations

import os
import socket
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

import psutil

from distmon.node import jobhosts, proc
from distmon.node.launchers import (
    LAUNCHERS,
    MAX_RAY_LOG,
    RAY_TRAIN_THREAD,
    RAY_TRAIN_WORKER,
    argv_rank,
    entry_point,
    launched_rank,
    launcher_job,
    local_rank,
    node_list,
    ray_train_rank,
    store_of,
    tree_rank,
)

HOST = socket.gethostname()
WORKER_NAME = "pt_data_worker"
"""What torch names a DataLoader worker's process (``comm``), whatever its start method."""
MAX_PROCESSES = 1 << 16
"""Processes a scan looks at, at most."""
SPAWNED = "--multiprocessing-fork"
"""The last word of the command line of a process that ``multiprocessing`` started by spawning
(``torch.multiprocessing.spawn``'s ranks among them)."""

ENVIRONMENT, COMMAND_LINE, TREE, STACK, RAY_LOG = "environment", "command line", "process tree", "stack", "Ray's log"
"""Where a found rank's rank was read."""


@dataclass(frozen=True)
class Process:
    """One process as a scan saw it."""

    pid: int
    ppid: int
    started: float
    """When it started (seconds since the epoch): a pid reused is another process."""
    name: str
    """Its ``comm`` (torch names a DataLoader worker ``pt_data_worker``)."""
    argv: tuple[str, ...] = ()
    """Its command line as the kernel keeps it: with the pid and start time, what tells the
    process before its ``exec`` (a launcher's copy) from after it (the rank)."""


@dataclass(frozen=True)
class FoundRank:
    """A rank found on this node: who its launcher said it is, and its process."""

    pid: int
    rank: int | None
    """Its rank; None where its launcher wrote it nowhere (``mp.spawn``'s, a launcher's own):
    its stack may tell (:mod:`distmon.node.found_ranks`)."""
    world: int
    local_rank: int
    job: str
    started: float
    launcher: int
    """The process that started it (torchrun's agent, ``slurmstepd``, ``prted``, ``mpirun``, the
    script that called ``mp.spawn``)."""
    workers: tuple[int, ...] = ()
    """Its DataLoader workers, by pid: its children torch named :data:`WORKER_NAME`."""
    read_from: str = ENVIRONMENT
    """Where its rank was read (:data:`ENVIRONMENT`, :data:`COMMAND_LINE`, :data:`TREE`)."""
    store: tuple[str, int] | None = None
    """The store its job's ranks meet at (``MASTER_ADDR``, ``MASTER_PORT``), where its
    environment says."""
    hosts: tuple[str, ...] = ()
    """The job's hosts as its launcher listed them (Slurm's node list)."""
    spawned: bool = False
    """Started by ``multiprocessing``'s spawn (``torch.multiprocessing.spawn``)."""
    thread: str | None = None
    """Where its training thread's frames stand, where that thread is not its main one (a Ray
    Train worker's: :data:`~distmon.node.launchers.RAY_TRAIN_THREAD`)."""


@dataclass
class Found:
    """What one scan found: the ranks of every job on this node, by job id."""

    jobs: dict[str, list[FoundRank]] = field(default_factory=dict)
    hidden: int = 0
    """Python processes whose environment could not be read (another user's, without
    CAP_SYS_PTRACE): ranks perhaps, not counted as any."""
    launchers: dict[int, list[str]] = field(default_factory=dict)
    """The ``mpirun`` processes here, by pid, with the hosts each names: a job launched from this
    host whose ranks all run on others (a head node's)."""

    def job_of(self, pid: int, ancestors: Mapping[int, int]) -> str | None:
        """The job with a rank that is ``pid``, or that ``pid`` started (a launcher's pid)."""
        for job, ranks in self.jobs.items():
            for r in ranks:
                if r.pid == pid or pid in _lineage(r.pid, ancestors):
                    return job
        return None


@dataclass(frozen=True)
class _Launched:
    """What a process's launcher gave it, as far as it tells."""

    rank: int | None = None
    world: int = 1
    local_rank: int = 0
    job: str | None = None
    entry: str = ""
    read_from: str = ENVIRONMENT
    node_rank: int | None = None
    """Lightning's ``NODE_RANK``, for a local rank its tree places."""
    store: tuple[str, int] | None = None
    hosts: tuple[str, ...] = ()
    spawned: bool = False
    thread: str | None = None
    candidate: bool = False
    """A process of a torch job whose rank its launcher gave nowhere it can be read here."""

    @property
    def a_rank(self) -> bool:
        known = self.rank is not None or self.node_rank is not None or self.candidate
        return known and self.entry not in LAUNCHERS


NOT_A_RANK = _Launched()


class Finder:
    """Scans this node's processes for ranks; remembers what never changes (a process's
    environment and command line, by pid and start time), so a scan a second costs little."""

    def __init__(self) -> None:
        self._known: dict[tuple[int, float, tuple[str, ...]], _Launched | None] = {}
        """Per (pid, start, command line): what its launcher gave it; None where its environment
        could not be read. The command line tells a process forked by its launcher before its
        ``exec`` (the launcher's copy, with the launcher's environment) from after (the rank)."""
        self._namespace = proc.net_namespace(os.getpid())
        self.parents: dict[int, int] = {}
        """Every process's parent, as of the last scan."""
        self._argv: dict[int, tuple[str, ...]] = {}

    def scan(self) -> Found:
        processes = list(_processes())
        self.parents = {p.pid: p.ppid for p in processes}
        self._argv = {p.pid: p.argv for p in processes}
        self._known = {key: v for key, v in self._known.items() if key[0] in self.parents}
        found = Found()
        ranks: dict[int, tuple[Process, _Launched]] = {}
        workers: dict[int, list[int]] = defaultdict(list)
        for p in processes:
            if p.name == WORKER_NAME:
                workers[p.ppid].append(p.pid)
            if jobhosts.is_mpirun(p.argv) and self._here(p.pid):
                found.launchers[p.pid] = jobhosts.mpirun_hosts(p.argv, _reader(p.pid))
            launched = self._launched(p)
            if launched is None:
                found.hidden += 1
            elif launched.a_rank and p.name != WORKER_NAME:  # a worker whose rank died is no rank either
                ranks[p.pid] = (p, launched)
        ranks = _placed_by_tree(ranks, {p.pid: p for p in processes})
        for pid, (p, launched) in sorted(_ranks_alone(ranks, self.parents).items()):
            job = _job(p, launched)
            rank = FoundRank(
                pid, launched.rank, launched.world, launched.local_rank, job, p.started, p.ppid,
                tuple(workers.get(pid, ())), launched.read_from, launched.store, launched.hosts, launched.spawned,
                launched.thread,
            )  # fmt: skip
            found.jobs.setdefault(job, []).append(rank)
        for job, ranks_of_job in found.jobs.items():
            found.jobs[job] = _with_world(ranks_of_job)
        return found

    def hosts_of(self, ranks: Iterable[FoundRank]) -> list[str]:
        """The other hosts of the job of ``ranks``, as this node can tell: the hosts its
        launcher listed (Slurm's node list, ``mpirun``'s hosts), the hosts its store hears from
        where the store is here, else the store's host."""
        hosts: list[str] = []
        for r in ranks:
            hosts.extend(r.hosts)
            for pid in [r.pid, *_lineage(r.pid, self.parents)]:
                argv = self._argv.get(pid, ())
                if jobhosts.is_mpirun(argv):
                    hosts.extend(jobhosts.mpirun_hosts(argv, _reader(pid)))
                    break
            if r.store is not None:
                address, port = r.store
                if jobhosts.is_here(address):
                    hosts.extend(jobhosts.named(peer) for peer in jobhosts.store_peers(port))
                else:
                    hosts.append(address)
        return [h for h in dict.fromkeys(hosts) if not jobhosts.is_here(h)][: jobhosts.MAX_HOSTS]

    def _launched(self, p: Process) -> _Launched | None:
        key = (p.pid, p.started, p.argv)
        if key not in self._known:
            launched = self._read(p)
            if launched is NOT_A_RANK and _ray_worker(p):
                return launched  # its rank comes to its log once it joins the job: read again next scan
            self._known[key] = launched
        return self._known[key]

    def _read(self, p: Process) -> _Launched | None:
        if not _python(p) or not self._here(p.pid):
            return NOT_A_RANK
        env = proc.environ(p.pid)
        if env is None:
            return None
        if _ray_worker(p):
            return _ray_rank(p.pid)
        store = store_of(env)
        base = _Launched(job=launcher_job(env), entry=entry_point(p.argv), store=store, hosts=tuple(node_list(env)))
        launched = launched_rank(env)
        if launched is not None:
            return replace(base, rank=launched[0], world=launched[1], local_rank=local_rank(env))
        by_argv = argv_rank(p.argv)
        world = (by_argv[1] or launched_world(env) or 0) if by_argv is not None else 0
        if by_argv is not None and store is not None and by_argv[0] < world:  # a rank of a torch job, not any --rank
            return replace(base, rank=by_argv[0], world=world, local_rank=by_argv[0], read_from=COMMAND_LINE)
        node = tree_rank(env)
        if node is not None:
            return replace(base, world=node[1], local_rank=node[2], node_rank=node[0], read_from=TREE)
        spawned = bool(p.argv) and p.argv[-1] == SPAWNED
        if spawned or store is not None:
            world = launched_world(env) or 0
            return replace(base, world=world, read_from=STACK, spawned=spawned, candidate=True)
        return NOT_A_RANK

    def _here(self, pid: int) -> bool:
        """In this process's network namespace: this node's (where namespaces cannot be read,
        every process is)."""
        theirs = proc.net_namespace(pid)
        return self._namespace is None or theirs is None or theirs == self._namespace


def launched_world(env: Mapping[str, str]) -> int | None:
    value = env.get("WORLD_SIZE", "").strip()
    return int(value) if value.isdigit() else None


def _placed_by_tree(
    ranks: dict[int, tuple[Process, _Launched]], processes: Mapping[int, Process]
) -> dict[int, tuple[Process, _Launched]]:
    """The local ranks Lightning's launcher started, each given its rank by the tree: local
    rank 0 is their parent, the process the user started, running the same script; the others
    are numbered on from ``NODE_RANK`` times the node's ranks (Lightning's own formula)."""
    placed = {pid: pair for pid, pair in ranks.items() if pair[1].node_rank is None}
    children: dict[int, list[tuple[Process, _Launched]]] = defaultdict(list)
    for p, launched in ranks.values():
        if launched.node_rank is not None:
            children[p.ppid].append((p, launched))
    for ppid, kids in children.items():
        if ppid in ranks and ranks[ppid][1].node_rank is not None:
            continue  # a local rank's own children, with its variables
        per_node, first = len(kids) + 1, kids[0][1]
        node = (first.node_rank or 0) * per_node
        job = first.job or f"{HOST}:{ppid}"
        for p, launched in kids:
            placed[p.pid] = (p, replace(launched, rank=node + launched.local_rank, job=job))
        parent = processes.get(ppid)
        if parent is not None and _python(parent) and entry_point(parent.argv) == first.entry != "":
            placed[ppid] = (parent, replace(first, rank=node, local_rank=0, job=job))
    return placed


def _ranks_alone(
    ranks: dict[int, tuple[Process, _Launched]], parents: Mapping[int, int]
) -> dict[int, tuple[Process, _Launched]]:
    """The ranks among ``ranks``: not a process with no rank of its own that started ranks (the
    script that called ``mp.spawn``, a launcher in Python: its environment names the job's store
    too), nor a child of a rank of its job with that rank's environment (a DataLoader worker, a
    compile worker)."""
    starters = {
        a for pid, (_, got) in ranks.items() if got.rank is not None or got.spawned for a in _lineage(pid, parents)
    }
    alone = {}
    for pid, (p, launched) in ranks.items():
        if pid in starters and launched.rank is None:
            continue
        above = next((ranks[a] for a in _lineage(pid, parents) if a in ranks and a not in starters), None)
        if above is not None and _job(*above) == _job(p, launched) and launched.rank in (None, above[1].rank):
            continue
        alone[pid] = (p, launched)
    return alone


def _with_world(ranks: list[FoundRank]) -> list[FoundRank]:
    """The ranks of one job in order; those spawned with no world size written anywhere have
    the number of their spawned siblings."""
    spawned: dict[int, int] = defaultdict(int)
    for r in ranks:
        if r.spawned:
            spawned[r.launcher] += 1
    ranks = [replace(r, world=spawned[r.launcher]) if r.spawned and not r.world else r for r in ranks]
    return sorted(ranks, key=lambda r: (r.rank is None, r.rank or 0, r.pid))


def _ray_worker(p: Process) -> bool:
    return bool(p.argv) and p.argv[0].startswith(RAY_TRAIN_WORKER)


def _ray_rank(pid: int) -> _Launched:
    """A Ray Train worker's rank, world and run, as Ray's log of the worker says them (its
    output goes to ``.../logs/worker-<id>-<job>-<pid>.out``; Ray Train logs the worker's joining
    in ``.../logs/train/ray-train-sys-worker-<id>.log``, older Ray Train in its output)."""
    out = proc.output_of(pid) or ""
    folder, name = os.path.split(out)
    if not name.startswith("worker-") or not name.endswith(".out"):
        return NOT_A_RANK
    worker = name.split("-")[1]
    for path in (os.path.join(folder, "train", f"ray-train-sys-worker-{worker}.log"), out, out[:-4] + ".err"):
        read = ray_train_rank(proc.read_text(path, MAX_RAY_LOG))
        if read is not None:
            rank, world, run = read
            job = f"ray-{run}" if run else f"ray-{worker[:12]}"
            return _Launched(rank, world, 0, job, RAY_TRAIN_WORKER, RAY_LOG, thread=RAY_TRAIN_THREAD)
    return NOT_A_RANK


def _python(p: Process) -> bool:
    """A Python interpreter: its executable's name, or where that may not be read (another
    user's process), its command line's first word."""
    exe = proc.executable_of(p.pid) or (p.argv[0] if p.argv else "")
    return "python" in os.path.basename(exe)


def _job(p: Process, launched: _Launched) -> str:
    """The job's id its launcher gave, else its launcher itself: the ranks one process started
    (Lightning's local rank 0 and the ranks it started are one job: theirs)."""
    return launched.job or f"{HOST}:{p.ppid}"


def _lineage(pid: int, parents: Mapping[int, int]) -> Iterable[int]:
    """The ancestors of ``pid``, its parent first."""
    seen = {pid}
    pid = parents.get(pid, 0)
    while pid > 1 and pid not in seen:
        yield pid
        seen.add(pid)
        pid = parents.get(pid, 0)


def _processes() -> Iterable[Process]:
    """This host's processes that still run (a process that has ended is no rank), at most
    :data:`MAX_PROCESSES`."""
    for n, p in enumerate(psutil.process_iter(["ppid", "create_time", "name", "cmdline", "status"])):
        if n >= MAX_PROCESSES:
            return
        info = p.info
        if info["status"] in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD) or info["create_time"] is None:
            continue
        argv = tuple(info["cmdline"] or ())[: proc.MAX_ARGS]
        yield Process(p.pid, info["ppid"] or 0, info["create_time"], info["name"] or "", argv)


def _reader(pid: int) -> Callable[[str], str]:
    """Reads a file named on process ``pid``'s command line, relative to its working directory."""
    cwd = proc.working_directory(pid) or "/"
    return lambda path: proc.read_text(os.path.join(cwd, path), jobhosts.MAX_FILE)
