"""Where the host's memory ran out under the ranks, no rank the log names at fault: the node's shared
memory (``/dev/shm``, which every process on it shares), or the memory Slurm gives the step (its
cgroup's out-of-memory killer named no task)."""

from __future__ import annotations

import re

from distmon.forensics.failures import SHARED_MEMORY, SIGKILL, TOGETHER, is_own, own_failure
from distmon.forensics.logfacts import LogFacts
from distmon.forensics.worker_exits import RANK, WORKER
from distmon.monitor.state.words import rank_word


def node_memory(log: LogFacts) -> str | None:
    """Where a line says shared memory ran out, or a bus error struck in NCCL's own thread, and
    no rank failed of anything else."""
    said = log.crashes.node_memory()
    if said is None or any(is_own(r) and not _SHM_WORDS.search(r.said) for r in log.raised.values()):
        return None
    return f"{SHARED_MEMORY}: {said}"


_SHM_WORDS = re.compile(r"shared memory|[Bb]us error")


def step_memory(log: LogFacts) -> str | None:
    """Where Slurm's cgroup killed a process of the step for memory, naming none (nor a task killed,
    nor one that failed otherwise): the step's memory, not a rank."""
    killed = any(e.signal_number == SIGKILL and e.unit != WORKER for e in log.exits)  # suspected as such
    if log.oom_killed is None or killed or own_failure(log) or log.waiting or log.crashes.crashes:
        return None
    return (
        f"Slurm's cgroup killed a process of the step for memory ({log.oom_killed}), which one it does not say: the "
        "step's host memory (--mem, --mem-per-cpu) against what its ranks hold (the data each loads, pinned memory, "
        "DataLoader workers), not a rank the log names"
    )


def killed_together(log: LogFacts, world: int) -> str | None:
    """Where every rank of the world was killed (SIGKILL) within a second, none waiting nor failing of its own
    before: something outside killed them all at once, no rank (the first a launcher saw end is only that)."""
    ends = [e for e in log.exits if e.unit == RANK and e.signal_number == SIGKILL]
    killed = {e.who for e in ends}
    times = [e.at for e in ends if e.at is not None]
    if world < 2 or not killed >= set(range(world)) or own_failure(log) or log.waiting:
        return None
    if times and max(times) - min(times) > TOGETHER:
        return None
    hosts = sorted({e.host for e in ends if e.host})
    on = f" on {', '.join(hosts[:3])}" if hosts else ""
    return (
        f"{rank_word(sorted(killed))}{on} were all killed (SIGKILL){' at once' if len(times) > 1 else ''}: from "
        "outside, not a rank: the memory limit of their node, container or job (the kernel's or the cgroup's OOM "
        "killer; `dmesg -T` on the node), or the scheduler or a user ending them"
    )
