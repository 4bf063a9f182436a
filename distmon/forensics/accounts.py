"""What the log's own accounts say of who held the job up, beside its ranks' waits and
exceptions: the reports torch, Horovod and the launchers print (:mod:`~distmon.forensics.desync`,
:mod:`~distmon.forensics.distributed_debug`, :mod:`~distmon.forensics.horovod`,
:mod:`~distmon.forensics.launcher_lines`), NCCL's own lines and the transports' word on a lost peer
(:mod:`~distmon.forensics.nccl`, :mod:`~distmon.forensics.peers`).

Each says one of: these ranks held the others up (a report names them: proven); no rank is to
blame (every rank failed alike at once, the program misused NCCL, the fabric failed, every rank
joined the same collective); or only where to look (a local rank or an srun task killed, a
lost peer's host): suspects.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from distmon.forensics.launcher_lines import LOCAL_RANK, ON_A_NODE, PROCESS, RANK, SPAWNED, TEARDOWN, WORKER
from distmon.forensics.logfacts import LogFacts
from distmon.forensics.tracebacks import Raised
from distmon.monitor.state.words import duration, rank_word

TOGETHER = 1.0
"""Seconds within which failures, or ranks' timeouts in the same collective, count as at once."""
TRANSPORT = (
    "every rank issued it, so none holds it up: that points to the transport (the network, NVLink or "
    "InfiniBand), a GPU, or NCCL itself, not to a rank"
)
ALIKE = (
    "the program or its environment (a bad input or argument, a library or driver, memory too small for the "
    "batch), not a rank"
)
MISUSED = (
    "the program or its launch used NCCL or the GPUs wrongly (its device assignment, a communicator used after "
    "it failed, arguments the ranks do not agree on), not a rank"
)
FABRIC = "the network between the nodes (the InfiniBand or RoCE fabric, a port, a switch), not a rank"
NVLINK = (
    "the node's NVLink fabric (its NVSwitches and the Fabric Manager that runs them: restarted without a GPU "
    "reset, or failed), not a rank"
)
USAGE = 2
"""The exit code of a Python process whose command line was refused (argparse's ``error()``) or
whose script could not be opened: a launch's mistake, the same on every rank."""
USAGE_WHY = (
    "exit code 2 is Python's usage error: the script refused the command line the launcher gave it (argparse), "
    "or could not be opened; every rank is launched alike, so the launch, not a rank"
)


@dataclass
class Accounts:
    """Who the log's own reports and launchers name."""

    named: dict[int, str] = field(default_factory=dict)
    """Ranks a report proves held the others up, with why."""
    nobody: str | None = None
    """Why no rank is to blame, where an account says so."""
    suspects: list[tuple[int, str]] = field(default_factory=list)
    """Ranks an account only points to, most likely first, with why."""


def accounts(log: LogFacts, world: int) -> Accounts:
    """What the log's accounts say, the proof first."""
    found = Accounts()
    for ranks, why in _reports(log, world):
        for rank in ranks:
            if rank < world:
                found.named.setdefault(rank, why)
    if found.named:
        return found
    found.nobody = _misuse(log) or _everyone_joined(log) or _usage(log) or alike(log) or _fabric(log) or _nvlink(log)
    if found.nobody is None:
        found.suspects = _killed(log) + _lost_peers(log, world) + _disagreeing(log, world)
        found.suspects += log.horovod.suspected(world if world > 1 else None)
    return found


def _reports(log: LogFacts, world: int) -> list[tuple[list[int], str]]:
    """The ranks each report names: the monitored barrier, torch's desync report (its ranks
    global where it is the world group's), the fingerprint check, Horovod's stall inspector."""
    named = [
        ([rank], f"never answered a peer's monitored barrier ({why})") for rank, why in log.debug.unanswered.items()
    ]
    for report in log.desync.reports:
        said = report.culprits()
        if said is not None and report.of_world:
            named.append(said)
    odd = log.debug.odd()
    if odd is not None:
        named.append(odd)
    held = log.horovod.holding_up(world if world > 1 else None)
    if held is not None:
        named.append(held)
    return named


def _misuse(log: LogFacts) -> str | None:
    misuse = log.nccl.misuse
    return f"{MISUSED}: {misuse}" if misuse else None


def _everyone_joined(log: LogFacts) -> str | None:
    for report in log.desync.reports:
        joined = report.everyone_joined()
        if joined is not None and report.of_world:
            return f"{joined}: {TRANSPORT}"
    return None


def _fabric(log: LogFacts) -> str | None:
    """Where the only failure the log shows is the fabric's (InfiniBand completion errors)."""
    if not log.peers.fabric_only or any(not r.consequence for r in log.raised.values()):
        return None
    return f"{FABRIC}: {log.peers.losses[0].said}"


def _nvlink(log: LogFacts) -> str | None:
    """Where the only failure the log shows is NCCL's NVLS transport's (NVLink SHARP through the
    node's NVSwitches)."""
    if log.nccl.nvls is None or any(not r.consequence for r in log.raised.values()):
        return None
    return f"{NVLINK}: NCCL's NVLS transport: {log.nccl.nvls}"


def _usage(log: LogFacts) -> str | None:
    """Where every failure the log shows is an exit with Python's usage error's code and no
    exception of the rank's own."""
    failures = _failures(log)
    if not failures or any(f.exception or f.exit != f"exit code {USAGE}" for f in failures):
        return None
    return f"{_whom(failures)} exited with code {USAGE}: {USAGE_WHY}"


@dataclass
class _Failure:
    """A rank's (or a process's) failure of its own: its exception where the log holds it, how
    its launcher says it ended where one does."""

    who: str
    exception: str | None = None
    exit: str | None = None
    at: float | None = None


def alike(log: LogFacts) -> str | None:
    """Why no rank is to blame where two ranks or more failed, each the same way (the same
    exception where the log holds them, the same exit where it does not), at once, and nothing
    else failed: the program or its environment failed everywhere."""
    failures = _failures(log)
    exceptions = {f.exception for f in failures if f.exception}
    exits = {f.exit for f in failures if f.exit}
    times = [f.at for f in failures if f.at is not None]
    if len(failures) < 2 or len(exceptions) > 1 or len(exits) > 1 or (times and max(times) - min(times) > TOGETHER):
        return None
    if any(f.exception is None for f in failures) and any(f.exit is None for f in failures):
        return None  # one said by its exception only, another by its exit only: not comparable
    spread = max(times) - min(times) if len(times) > 1 else 0.0
    together = f" within {duration(spread)}" if spread >= 0.1 else " at once"
    how = next(iter(exceptions)) if all(f.exception for f in failures) else next(iter(exits))
    return f"{_whom(failures)} failed alike{together} ({how}): {ALIKE}"


def _failures(log: LogFacts) -> list[_Failure]:
    """Each rank's (or process's) failure of its own (a local rank's or a task's only where no
    launcher names global ranks: they are the same workers)."""
    found: dict[str, _Failure] = {}
    for rank, raised in log.raised.items():
        if not raised.cut and not raised.consequence and raised.launcher is None:
            found[f"{RANK} {rank}"] = _Failure(f"{RANK} {rank}", exception=_kind(raised), at=raised.at)
    ranked = any(e.unit == RANK for e in log.exits)
    same = (*ON_A_NODE, PROCESS)  # the ranks' workers again, where a launcher names the ranks
    for e in log.exits:
        if e.code in (None, 0) or e.code in TEARDOWN or e.unit == WORKER or (ranked and e.unit in same):
            continue
        if e.unit == RANK and (own := log.raised.get(e.who)) is not None and (own.cut or own.consequence):
            continue  # its exception was another's consequence: its exit is that too
        failure = found.setdefault(f"{e.unit} {e.who}", _Failure(f"{e.unit} {e.who}"))
        failure.exit = e.how
        failure.at = failure.at if failure.at is not None else e.at
    return list(found.values())


def _kind(raised: Raised) -> str:
    """An exception as alike across ranks: its type and its message's first sentence, numbers
    left out (each rank's OOM names its own GPU and sizes)."""
    sentence = re.split(r"\.\s", raised.message.split("\n")[0], maxsplit=1)[0]
    message = re.sub(r"\d+", "N", sentence)[:120]
    return f"{raised.type}: {message}" if message else raised.type


def _whom(failures: list[_Failure]) -> str:
    ranks = sorted(int(f.who.split()[-1]) for f in failures if f.who.startswith(f"{RANK} "))
    others = [f.who for f in failures if not f.who.startswith(f"{RANK} ")]
    units = {w.rsplit(" ", 1)[0] for w in others}
    parts = [rank_word(ranks)] if ranks else []
    if others:
        unit = units.pop() if len(units) == 1 else "workers"
        plural = "" if len(others) == 1 else "es" if unit.endswith("process") else "s"
        parts.append(f"{len(others)} {unit}{plural}")
    return " and ".join(parts)


def _killed(log: LogFacts) -> list[tuple[int, str]]:
    """Local ranks, srun tasks and ``mp.spawn``'s processes that died, where the log names no
    global rank for them."""
    found = []
    for e in log.exits:
        if e.unit not in ON_A_NODE or e.code in (None, 0) or e.code in TEARDOWN:
            continue
        if e.unit == LOCAL_RANK:
            why = f"local rank {e.who} ended by {e.how}, as torchrun says: rank {e.who} if the job ran on one node"
        elif e.unit == SPAWNED:
            why = f"process {e.who} ended by {e.how}, as {e.by} says: rank {e.who} if the job ran on one node"
        else:
            why = f"srun task {e.who} ended by {e.how}: rank {e.who} if srun started a task a rank"
        found.append((e.who, why))
    return found


def _disagreeing(log: LogFacts, world: int) -> list[tuple[int, str]]:
    """Two ranks the fingerprint check found running different collectives, where it does not
    say which of them is the odd one."""
    ran = log.debug.ran
    return [
        (
            rank,
            f"ran {ran[rank]} where the other ran {next(p for r, p in ran.items() if r != rank)} "
            "(TORCH_DISTRIBUTED_DEBUG's check; which of them is odd, it does not say)",
        )
        for rank in log.debug.disagreeing()
        if rank < world and len(ran) > 1
    ]


def _lost_peers(log: LogFacts, world: int) -> list[tuple[int, str]]:
    """The ranks on the hosts a transport says it lost, where NCCL's lines place them."""
    found = []
    for peer in log.peers.peers():
        for rank in log.nccl.ranks_on(peer):
            if rank < world:
                found.append((rank, f"on {peer}, the peer whose connection closed"))
    return found
