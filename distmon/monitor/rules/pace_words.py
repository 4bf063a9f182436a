"""A straggler in words: the facts :mod:`distmon.monitor.rules.pace` decides of it (who holds
whom up, by how much, how sure that is, what its host and its data say) and the summary and
detail they read as. Nothing is decided here."""

from __future__ import annotations

from dataclasses import dataclass

from distmon.monitor.state.alerts import WARNING, Finding
from distmon.monitor.state.kinds import AlertKind
from distmon.monitor.state.words import group_name, rank_word, slower
from distmon.wire import GroupStatus, Report


@dataclass(frozen=True)
class Straggler:
    """``ranks`` hold up their peers ``share`` of the time: all of a node's (``host``), or one."""

    ranks: tuple[int, ...]
    host: str | None
    """The node whose every rank is slow; None for a rank alone."""
    share: float
    waits: float
    """Its share of time waiting in collectives ..."""
    peers: float
    """... and its peers', in ``group``."""
    group: GroupStatus | None
    data: float
    """Its share of time waiting for DataLoader batches, and its peers'."""
    peers_data: float
    slow_data: bool
    """It waits for data far longer than its peers do."""
    starved: str | None
    """How short of CPU its training thread is, where it is (the prober saw it)."""
    report: Report
    """The latest report of its first rank."""


def key(facts: Straggler) -> str:
    return f"straggler:node {facts.host}" if facts.host is not None else f"straggler:{facts.ranks[0]}"


def finding(facts: Straggler) -> Finding:
    return Finding(key(facts), AlertKind.STRAGGLER, WARNING, list(facts.ranks), straggler_summary(facts), detail(facts))


def straggler_summary(facts: Straggler) -> str:
    who = f"node {facts.host}" if facts.host is not None else f"rank {facts.ranks[0]}"
    cost = f"the job steps {slower(facts.share)} slower because of {who}"
    held = f"{facts.share:.0%} of the time"
    if facts.starved is not None:
        return f"{who} is short of CPU: {facts.starved}; {cost}"
    if facts.host is not None:
        return f"{who} is slow: its {rank_word(facts.ranks)} hold up their peers {held}; {cost}"
    return f"{who} holds up its peers {held}: {cost}"


def detail(facts: Straggler) -> str:
    r = facts.report
    step = f"{r.step_time.p50 * 1000:.0f} ms" if r.step_time else "unknown"
    group = f" in {group_name(facts.group.id, facts.group)}" if facts.group is not None else ""
    waits = f"in collectives {facts.waits:.0%} of the time"
    peers, late = f"peers{group} {facts.peers:.0%}", f"{facts.share:.0%}"
    if facts.host is None:
        who = f"rank {r.rank} ({r.host}, pid {r.pid}) waits {waits}, its {peers}"
        late = f"it comes to each collective {late} of the time later than they do, and they wait for it"
    else:
        who = f"{rank_word(facts.ranks)}, on node {facts.host}, wait {waits}, their {peers}"
        late = f"they come to each collective {late} of the time later than their peers do, who wait for them"
    lines = [
        f"{who}: {late}. Every rank steps at the slowest's pace ({step} a step); without the hold-up the job would "
        f"step {slower(facts.share)} faster. Read off samples of the ranks' steps (pauses left out), named once "
        "sure beyond chance.",
        f"DataLoader wait: {facts.data:.0%} of the time (peers {facts.peers_data:.0%}).",
        f"What to do: {advice(facts)}",
    ]
    return "\n".join(lines)


def advice(facts: Straggler) -> str:
    host = facts.host or facts.report.host
    if facts.starved is not None:
        return (
            f"other processes take {host}'s CPUs (another job, DataLoader workers, a compile): `top` on it; "
            "give the job the host's CPUs, or fewer workers or threads per rank (num_workers, OMP_NUM_THREADS)."
        )
    if facts.slow_data:
        return (
            "it is starved of data: raise num_workers or prefetch_factor on it, check its host's storage and "
            "CPU load, and that its shard is not larger or slower to decode."
        )
    if facts.host is not None:
        gpus = (
            ""
            if facts.report.gpu is None
            else ", its GPUs' clocks and temperature (`nvidia-smi -q -d PERFORMANCE,TEMPERATURE`)"
        )
        return (
            f"look at what {host}'s ranks share: its network link to the others (`ibstat`, `ethtool -S`, link "
            f"errors, a port at a lower speed){gpus}, its CPUs and memory (`top`, another job on it); or drain it "
            "from the job."
        )
    if facts.report.gpu is None:
        return (
            f"look at {host}: other processes on its CPUs (`top`), their clocks and temperature (`lscpu`, "
            "`sensors`), a slower link or disk; or whether its share of the data is larger."
        )
    return (
        f"look at {host}: GPU {facts.report.local_rank}'s clocks and throttling (`nvidia-smi -q -d "
        "PERFORMANCE,CLOCK`), its temperature and power, other processes on its CPUs or GPU (`top`, "
        "`nvidia-smi`), a slower device or link; or whether its share of the data is larger."
    )
