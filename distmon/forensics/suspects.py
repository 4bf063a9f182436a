"""The ranks a log only points to, where no report proves who held the job up and nothing says
no rank is to blame: rank 0 where the ranks at its monitored barrier got no answer, a rank whose
GPU NCCL found out of memory, a rank the C++ runtime or glibc aborted over an error of its own, a
worker a launcher saw fail first, a local rank or an srun task killed, the rank the others waited
for in the store, a lost peer's host or the rank a send or receive named, the store's host. Most
likely first."""

from __future__ import annotations

from distmon.forensics.failures import SIGKILL, TOGETHER, ended_in_failure
from distmon.forensics.logfacts import LogFacts
from distmon.forensics.pasted_stacks import WAITS
from distmon.forensics.tracebacks import GRAPH
from distmon.forensics.worker_exits import (
    LOCAL_RANK,
    ON_A_NODE,
    PROCESS,
    RANK,
    SELF,
    SIGABRT,
    SIGBUS,
    SIGTERM,
    SPAWNED,
    TASK,
    TEARDOWN,
    WORKER,
    WorkerExit,
)
from distmon.monitor.state.whereabouts import classify
from distmon.monitor.state.words import rank_word, ranks_text, where

TASK_FAILURE = "TASK FAILURE"
"""Why slurmstepd cancelled a step (``CANCELLED AT ... DUE TO TASK FAILURE``): a task of its own failed
(srun's ``--kill-on-bad-exit``), and the step's other tasks were ended for it."""
SPARED_AT_MOST = 2
"""Tasks srun's list of those it ended may leave out and still single out the one that failed."""


def suspects(log: LogFacts, world: int) -> list[tuple[int, str]]:
    """Where to look, most likely first, with why."""
    waiters = log.stores.waiting()  # a launcher's word on its end: its wait timing out
    outlived = _outlived(log)
    aborted = {e.who for e in log.exits if e.unit == RANK and e.code == SIGABRT} if outlived else set()
    ended = outlived + _aborted_itself(log, world) + _killed(log) + _spared(log, world)
    ended = [(rank, why) for rank, why in ended if rank not in waiters and rank not in aborted]
    found = log.unjoined().suspected + _unanswering(log) + _starved(log, world) + ended
    found += lost_peers(log, world) + _lost_elsewhere(log, world)
    found += _disagreeing(log, world) + _behind(log, world) + _unannounced(log, world)
    found += log.horovod.suspected(world if world > 1 else None) + log.ray.suspected(world) + log.ras.suspected(world)
    found = log.deepspeed.suspected() + found
    found = [odd for report in log.desync.reports if report.of_world for odd in report.at_odds()] + found
    return _once(
        _stopped_elsewhere(log, world)
        + _stood_apart(log, world)
        + found
        + _awaited(log, world)
        + _short_barrier(log, world)
        + _store_host(log, world)
    )


def _unannounced(log: LogFacts, world: int) -> list[tuple[int, str]]:
    """The few ranks of the world no process announced (Lightning's ``Initializing distributed: GLOBAL_RANK: 6,
    MEMBER: 7/8``, printed before init_process_group), where each other rank was announced once and the log shows
    no rank waiting nor failing: they never reached init, where the others wait for them."""
    announced = log.announced
    missing = [r for r in range(world) if r not in announced]
    if not announced or not missing or len(missing) * 2 > world or any(n > 1 for n in announced.values()):
        return []
    if log.failed_or_waited():
        return []
    why = (
        "every other rank's `Initializing distributed: GLOBAL_RANK` line is in the log, not its: it never reached "
        "init_process_group (its process not started, or stuck before: an import, data preparation), where the "
        "others wait for it"
    )
    return [(r, why) for r in missing]


def _once(found: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Each rank once, where it first stands, with every reason the log gives for it."""
    reasons: dict[int, list[str]] = {}
    for rank, why in found:
        said = reasons.setdefault(rank, [])
        said += [why] if why not in said else []
    return [(rank, "; and ".join(whys)) for rank, whys in reasons.items()]


def _unanswering(log: LogFacts) -> list[tuple[int, str]]:
    """Rank 0, where ranks that came to its monitored barrier waited for its answer in vain."""
    return [
        (
            rank,
            f"ranks that came to its monitored barrier waited for its answer ({why}): it held them up, or "
            "waited itself for a rank that never came (its own log names it)",
        )
        for rank, why in log.debug.unanswering().items()
    ]


def _starved(log: LogFacts, world: int) -> list[tuple[int, str]]:
    """The rank whose GPU NCCL found out of memory (``NCCL WARN Cuda failure 'out of memory'``), as its
    process's own lines of NCCL's set-up place it: its own failure, where the log shows no other rank's
    GPU out of memory."""
    starved = log.nccl.out_of_memory()
    if starved is None or (world and starved[0] >= world):
        return []
    rank, process = starved
    return [
        (
            rank,
            f"NCCL found its GPU out of memory ({process}, rank {rank} of the communicator its lines set up): its "
            "own failure, its GPU fuller than its peers' (a larger share of the batch or the model, another process "
            "on that GPU)",
        )
    ]


OUTLIVED_SHARE = 4
"""Ranks aborting together, at least, for each rank torn down among them that singles it out."""


def _outlived(log: LogFacts) -> list[tuple[int, str]]:
    """Ranks a launcher tore down (SIGTERM), still running, where many more aborted together (SIGABRT within a
    second: each one's watchdog on a collective that timed out, most likely): the few that collective waited for,
    in none of their own."""
    aborted = {e.who: e for e in log.exits if e.unit == RANK and e.code == SIGABRT}
    closed = _closed(log)
    torn = sorted(({e.who for e in log.exits if e.unit == RANK and e.code == SIGTERM} | closed.keys()) - aborted.keys())
    times = [e.at for e in aborted.values() if e.at is not None]
    if len(aborted) < 3 or not torn or len(torn) * OUTLIVED_SHARE > len(aborted):
        return []
    if times and max(times) - min(times) > TOGETHER:
        return []
    by = next(iter(aborted.values())).by
    why = (
        f"{by} tore it down still running, while {rank_word(aborted)} aborted together (SIGABRT: each one's watchdog "
        "on a collective that timed out, most likely): the rank they waited for, in no collective of its own"
    )
    placed = " (pid {}: the table's pids, one after another by rank, put it at this rank)"
    return [(rank, why + (placed.format(closed[rank]) if rank in closed else "")) for rank in torn]


def _closed(log: LogFacts) -> dict[int, int]:
    """The ranks of the pids torchrun's agent closed (SIGTERM: still running) that its table leaves out. It starts a
    host's workers in local-rank order, their pids one after another: where three of the table's ranks of one host
    or more keep one distance between pid and rank, a closed pid at that distance is the rank it names (each rank's
    pid)."""
    rows = [e for e in log.exits if e.unit == RANK and e.pid is not None and e.who >= 0]
    offsets = {e.pid - e.who for e in rows if e.pid is not None}
    if len(rows) < 3 or len(offsets) != 1 or len({e.host for e in rows}) != 1:
        return {}
    offset, listed = offsets.pop(), {e.who for e in rows}
    within = range(min(listed), max(listed) + 2)  # the host's ranks, the last perhaps the one closed
    return {pid - offset: pid for pid in log.closed if pid - offset in within and pid - offset not in listed}


def _aborted_itself(log: LogFacts, world: int) -> list[tuple[int, str]]:
    """Ranks that aborted over an error of their own under their label (the C++ runtime's ``terminate``,
    what it threw not a collective's word on a peer; glibc's on a corrupted heap), where no launcher's
    word on their end suspects them already."""
    ended = {e.who for e in log.exits if e.unit == RANK and ended_in_failure(e, log)}
    found: dict[int, str] = {}
    for crash in log.crashes.crashes:
        rank = crash.rank
        if rank is None or crash.own is None or rank in ended or rank in log.raised or (world and rank >= world):
            continue
        found.setdefault(rank, f"rank {rank} aborted ({crash.said}): an error of its own")
    return list(found.items())


def _awaited(log: LogFacts, world: int) -> list[tuple[int, str]]:
    """The ranks a store wait names as awaited (a communicator's root), then the main process a
    rank waited for in a block it runs first, then the rank whose progress bar still ran."""
    stores, found = log.stores, []
    waiters = stores.waiting()
    for awaited in stores.awaited():
        found.append(
            (awaited, "the others waited in c10d's store for its part of the set-up (the ncclUniqueId it sends)")
        )
    drawer = log.progress[0] if log.progress is not None else None
    for waiter, context in stores.main_first[:1]:
        who = f"rank {waiter}" if waiter is not None else "a process"
        # the main process is the node's own where the block is local (transformers' default): a rank
        # whose progress bar still ran, below the waiter, is that one
        main = drawer if drawer is not None and drawer not in waiters and (waiter is None or drawer < waiter) else 0
        if main not in waiters:
            found.append(
                (
                    main,
                    f"the main process: {who} waited for it in a barrier inside {context}, whose block the "
                    "main process (its node's, where the block is local) runs first (preparing or loading data) "
                    "while the others wait",
                )
            )
    if log.progress is not None and (stores.waits or stores.main_first or (log.timed_out and not log.waiting)):
        drawer, bar = log.progress
        busy = drawer if drawer is not None else 0 if 0 not in waiters else None
        if busy is not None:
            drew = (
                "its progress bar"
                if drawer is not None
                else "a progress bar no rank labels (the main process's, as a rule)"
            )
            found.append((busy, f"still working while the others waited: {drew} ran on to {bar}"))
    named: dict[int, list[str]] = {}
    for rank, why in found:
        if rank < max(world, 1) and rank not in waiters:
            named.setdefault(rank, []).append(why)
    return [(rank, "; ".join(whys)) for rank, whys in named.items()]


def _short_barrier(log: LogFacts, world: int) -> list[tuple[int, str]]:
    """Where fewer ranks reached a group's store-based barrier than the world has: the ranks the
    log does not show waiting in it."""
    short = log.stores.short()
    if short is None:
        return []
    size, count, key = short
    why = f"not among the ranks shown waiting in the store-based barrier of {key}, which {count} of {size} reached"
    return [(r, why) for r in range(min(size, world or size)) if r not in log.stores.barrier_ranks]


BUS_ERROR = (
    "a bus error, most often the node's shared memory (/dev/shm) run out, which every process on the node shares; "
    "else a file mapped and cut under it"
)
"""Why a worker a launcher saw end first by SIGBUS is suspected, not proven."""


ABORTED = (
    "an abort of its own (a C++ exception, a failed check or assertion, a CUDA error its watchdog caught), unless a "
    "collective timed out first where the log does not show it"
)
"""Why a worker a launcher saw end by SIGABRT first, where no rank of the log timed out, is suspected."""


def spared(log: LogFacts, world: int) -> list[int]:
    """The srun tasks its list of those it ended (SIGTERM) leaves out, one or two: inside the span
    of the list; where Slurm cancelled the step over a task's failure, up to the world's end too.
    Each ended otherwise than torn down: the task that failed, whose own end its line said apart or
    the paste cut."""
    ended = _ended_tasks(log)
    others = {e.who for e in log.exits if e.unit == TASK} - ended
    if len(ended) < 2:
        return []
    low, high = (0, max(world, max(ended) + 1)) if log.cancelled == TASK_FAILURE else (min(ended), max(ended))
    if not 1 <= (high - low) - sum(1 for task in ended if low <= task < high) <= SPARED_AT_MOST:
        return []  # (counted first: srun's numbers are read from the log, the range's size unbounded)
    left = sorted(set(range(low, high)) - ended)
    return left if not others - set(left) else []


def _ended_tasks(log: LogFacts) -> set[int]:
    """The srun tasks srun says it ended by SIGTERM (``Terminated``, or exit code 143 through a shell)."""
    return {e.who for e in log.exits if e.unit == TASK and e.signal_number == -SIGTERM}


def _spared(log: LogFacts, world: int) -> list[tuple[int, str]]:
    """The tasks :func:`spared` finds whose own end no line says (one a line says is suspected by it)."""
    said = {e.who for e in log.exits if e.unit == TASK}
    ended = len(_ended_tasks(log))
    cancelled = " as Slurm cancelled the step over a task's failure" if log.cancelled == TASK_FAILURE else ""
    return [
        (
            task,
            f"srun task {task} is not among the {ended} tasks srun ended{cancelled}: it ended otherwise (the task "
            f"that failed), rank {task} if srun started a task a rank",
        )
        for task in spared(log, world)
        if task not in said
    ]


def _killed(log: LogFacts) -> list[tuple[int, str]]:
    """Local ranks, srun tasks and ``mp.spawn``'s processes that died, where the log names no
    global rank for them (how in the launcher's words where it gives no code: ``mp.spawn``'s
    process that raised, the deepspeed launcher's only worker); a launcher's first observed
    failure whose exit the paste cut, and the ranks that failed within a second of it; a rank a
    launcher saw end first by SIGABRT, where no rank timed out (then it is the watchdog's abort);
    ranks a launcher saw fail where it says which first of none (Intel MPI's blocks)."""
    found = _cut_root(log)
    first = any(e.first and e.unit == RANK for e in log.exits)
    ranked = {e.by for e in log.exits if e.unit == RANK}  # its local ranks' ends are those ranks' again
    placed = log.deepspeed.first() is not None  # its nodes' ranks say whose worker it was
    for e in log.exits:
        if not ended_in_failure(e, log) or (placed and e.by in ("the deepspeed launcher", "pdsh")):
            continue
        if e.unit == RANK:
            if e.code == SIGABRT and e.first and e.who not in log.raised:
                found.append((e.who, f"rank {e.who} ended by {e.how} first, as {e.by} says: {ABORTED}"))
            elif e.code == SIGBUS and e.first and e.who not in log.raised:
                found.append((e.who, f"rank {e.who} ended by {e.how} first, as {e.by} says: {BUS_ERROR}"))
            elif not first and e.code is not None and e.who not in log.raised:
                found.append(
                    (e.who, f"rank {e.who} ended by {e.how}, as {e.by} says; which rank first, it does not say")
                )
            continue
        if e.unit not in ON_A_NODE or (e.code is None and e.unit == SPAWNED and e.who in log.raised):
            continue  # a spawned process's traceback in the log says how it ended, or that it waited
        if e.unit == LOCAL_RANK and e.by in ranked:
            continue
        if (raised := log.raised.get(e.who)) is not None and raised.consequence:
            continue  # the rank of that number raised because it lost a peer: its end is that
        aborted = f"; {ABORTED}" if e.code == SIGABRT else ""
        if e.unit == LOCAL_RANK and (rank := log.node_rank(e.who)) is not None:
            node = rank_word(sorted(log.announced))
            found.append((rank, f"local rank {e.who} ended by {e.how}, as {e.by} says, on the node of {node}"))
            continue
        if e.unit == LOCAL_RANK:
            why = f"local rank {e.who} ended by {e.how}, as {e.by} says: rank {e.who} if the job ran on one node"
        elif e.unit == SPAWNED:
            why = f"process {e.who} ended by {e.how}, as {e.by} says: rank {e.who} if the job ran on one node"
        elif log.tasks_are_nodes:
            continue  # srun's task is a node's launcher: which of its ranks failed, the launcher's own lines say
        else:
            why = _task(log, e)
        found.append((e.who, why + aborted))
    return found


def _task(log: LogFacts, e: WorkerExit) -> str:
    """srun's words on a task that failed, said alike of the tasks it says ended alike on that host (a
    node's ranks, which fail together where the node does); Slurm's out-of-memory kills beside a SIGKILL."""
    alike = [x.who for x in log.exits if x.unit == TASK and x.host == e.host and x.how == e.how]
    tasks = f"task {e.who}" if len(alike) == 1 else f"tasks {ranks_text(alike)}"
    where = f" on {e.host}" if e.host else ""
    ranks = rank_word(alike)
    why = f"srun {tasks}{where} ended by {e.how}: {ranks} if srun started a task a rank"
    if e.signal_number == SIGKILL and log.oom_killed is not None:
        why += f"; Slurm's cgroup killed for memory ({log.oom_killed})"
    return why


def _cut_root(log: LogFacts) -> list[tuple[int, str]]:
    """A launcher's first observed failure whose exit code the paste cut (or which the launcher
    says in words: mpirun's process that exited without ``MPI_Finalize``): it failed first, how is
    not in the log; the ranks its table shows failing within a second of it may have failed as
    early (its times are whole seconds)."""
    root = next((e for e in log.exits if e.first and e.unit == RANK and e.code is None), None)
    if root is None or root.who in log.raised:
        return []
    how = f": it {root.said}" if root.said else "; how it ended is cut from the log"
    found = [(root.who, f"{root.by}'s first observed failure{how}")]
    for e in log.exits:
        close = root.at is not None and e.at is not None and abs(e.at - root.at) <= TOGETHER
        if e.unit == RANK and e is not root and close and e.code not in (None, 0) and e.code not in TEARDOWN:
            found.append((e.who, f"it failed in the same second ({e.how}), as {e.by} says"))
    return found


def _behind(log: LogFacts, world: int) -> list[tuple[int, str]]:
    """Ranks ``ProcessGroupWrapper``'s lines show a collective behind the others."""
    behind = log.debug.behind()
    return [] if behind is None else [(rank, behind[1]) for rank in behind[0] if not world or rank < world]


def _stopped_elsewhere(log: LogFacts, world: int) -> list[tuple[int, str]]:
    """The ranks a signal stopped (Ctrl-C, a scheduler's SIGTERM) outside any collective, where others
    it stopped were inside one, or others lost a peer: those waited for them, or lost them (a hang
    someone interrupted, one rank stopped)."""
    stopped = {rank: r for rank, r in log.raised.items() if r.stopped and rank < max(world, 1)}
    inside = sorted(rank for rank, r in stopped.items() if r.collective is not None)
    lost = sorted(rank for rank, r in log.raised.items() if r.consequence and not r.launchers)
    if not inside and not lost:
        return []
    others = (
        f"the collective {rank_word(inside)} were stopped in: they waited for it"
        if inside
        else (f"a collective: {rank_word(lost)} lost their peer")
    )
    found = []
    for rank, r in sorted(stopped.items()):
        if r.collective is None and r.frames:
            place = classify(r.frames)
            yours = f" (your code: {where(place.user)})" if place.user is not None else ""
            found.append((rank, f"stopped ({r.type.rsplit('.', 1)[-1]}) {place.words}{yours}, not in {others}"))
    return found


def _stood_apart(log: LogFacts, world: int) -> list[tuple[int, str]]:
    """The fewer ranks whose pasted stacks (py-spy's, faulthandler's) stand elsewhere than in a collective,
    a send or receive, the rendezvous or a CUDA sync, where the others' stand: those wait, most likely for
    them, as do the ranks whose watchdog lines say they waited in a collective (whatever their stacks show:
    a snapshot says where a rank stood, not that it stayed there; the stacks only suspect)."""
    ranked = {rank: p for rank, p in log.stacks.ranked.items() if rank < max(world, 1)}
    waited = log.waiting
    stood = sorted(rank for rank, p in ranked.items() if p.place().kind in WAITS and rank not in waited)
    apart = sorted(ranked.keys() - set(stood) - waited)
    if not apart or len(apart) > len(stood) + len(waited):
        return []
    others = [f"{rank_word(stood)} stood {ranked[stood[0]].place().words}"] if stood else []
    others += [f"{rank_word(sorted(waited))} wait in a collective (their watchdog lines)"] if waited else []
    where = " and ".join(others)
    return [(r, f"its stack, which {ranked[r].how} took, {ranked[r].words()}, where {where}") for r in apart]


def _lost_elsewhere(log: LogFacts, world: int) -> list[tuple[int, str]]:
    """Where three ranks or more lost a peer, those that lost it at another place in their code than the most did
    (the fewer, one place): they stood elsewhere (another collective, a branch of their own), so the others
    waited for them, and lost them as the job ended."""
    places: dict[tuple[str, int], list[int]] = {}
    for rank, r in log.raised.items():
        user = classify(r.frames).user if r.consequence and r.frames and rank < max(world, 1) else None
        if user is not None:
            places.setdefault((user.file, user.line), []).append(rank)
    if sum(map(len, places.values())) < 3 or len(places) < 2:
        return []
    ordered = sorted(places.items(), key=lambda item: len(item[1]))
    (odd, few), (most, many) = ordered[0], ordered[-1]
    if len(few) >= len(ordered[1][1]) or len(few) >= len(many):
        return []
    at, usual = f"{odd[0]}:{odd[1]}", f"{most[0]}:{most[1]}"
    why = f"it lost its peer at {at} where {rank_word(many)} lost theirs at {usual}: it stood elsewhere than they"
    return [(rank, why + " (another collective, a branch of its own)") for rank in sorted(few)]


def _disagreeing(log: LogFacts, world: int) -> list[tuple[int, str]]:
    """Two ranks the fingerprint check found running different collectives, where it does not
    say which of them is the odd one."""
    ran = log.debug.stated()
    return [
        (
            rank,
            f"ran {ran[rank]} where the other ran {next(p for r, p in ran.items() if r != rank)} "
            "(TORCH_DISTRIBUTED_DEBUG's check; which of them is odd, it does not say)",
        )
        for rank in log.debug.disagreeing()
        if rank < world and len(ran) > 1
    ]


def _store_host(log: LogFacts, world: int) -> list[tuple[int, str]]:
    """Where ranks lost c10d's store and rank 0 is not among them: rank 0, whose process creates the
    store (unless torchrun's agent holds it, on rank 0's node)."""
    lost = log.stores.lost
    if not lost or 0 in lost or world < 1:
        return []
    return [
        (
            0,
            "the store's usual host: rank 0's process creates c10d's store (unless torchrun's agent holds it, on "
            "rank 0's node), and the ranks that lost it saw its server go first",
        )
    ]


def lost_peers(log: LogFacts, world: int) -> list[tuple[int, str]]:
    """The ranks on the hosts a transport says it lost, where NCCL's lines place them, and the
    rank a send or receive named where the connection it waited on closed."""
    found = []
    gone = gone_peer(log)
    for peer in [*log.peers.peers(), *([gone] if gone else [])]:
        where = f"{host} ({peer})" if (host := log.nccl.addresses.get(peer)) else peer
        why = "the peer whose connection closed" if peer != gone else f"the one peer {FABRIC_GONE}"
        for rank in log.nccl.ranks_on(peer):
            if rank < world:
                found.append((rank, f"on {where}, {why}"))
    return found + [p for p in _p2p_peers(log) if all(p[0] != rank for rank, _ in found)]


FABRIC_GONE = (
    "every InfiniBand completion error names, whose ranks' lines stop before the errors: its processes went away "
    "(killed, its node lost), or the link to it failed; its own log says which"
)


def gone_peer(log: LogFacts) -> str | None:
    """The one peer every InfiniBand completion error names, where NCCL's lines place ranks on it and none of
    them waited or raised in the log: its processes went away, and the work requests to them failed with them."""
    peers = {loss.peer for loss in log.peers.losses}
    if not log.peers.fabric_only or len(peers) != 1 or "" in peers:
        return None
    peer = peers.pop()
    ranks = log.nccl.ranks_on(peer)
    return peer if ranks and not any(r in log.waiting or r in log.raised for r in ranks) else None


def _p2p_peers(log: LogFacts) -> list[tuple[int, str]]:
    """The peer a rank's send or receive named in the program's line, where the connection it
    waited on closed: the peer's process ended or crashed first."""
    found = []
    for rank, frame in log.p2p_closed:
        where = f"`{frame.code}` in {frame.func}, {frame.file.rsplit('/', 1)[-1]}:{frame.line}"
        found.append((rank, f"the peer this call named ({where}), whose connection closed"))
    return found


_BUILDING = ("the deepspeed launcher", "the launcher")
"""Launchers whose line on a worker's end prints the command they built last, whichever worker ended."""


def unnamed_ends(log: LogFacts) -> list[str]:
    """What the launchers say of workers they do not name by rank: a worker of theirs ended (the
    command they print is the last they built), so many processes returned non-zero, a process
    by its pid; none where a launcher names the rank."""
    if any(e.unit == RANK for e in log.exits) or log.deepspeed.first() is not None:
        return []  # a launcher names the rank, or DeepSpeed's nodes place the worker
    said = []
    for e in log.exits:
        if e.unit == WORKER and e.code != 0 and (e.code is not None or e.said) and e.said != SELF:
            who = "a worker" if e.count == 1 else f"{e.count} workers"
            who += f" on {e.host}" if e.host else ""
            built = " (the command its line prints is the last it built)" if e.by in _BUILDING and e.code else ""
            said.append(f"{e.by} says {who} ended by {e.how}, not which{built}")
        elif e.unit == TASK and log.tasks_are_nodes and e.code not in (None, 0, SIGTERM):
            where = f" on {e.host}" if e.host else ""
            said.append(
                f"srun says task {e.who}, the launcher{where}, ended by {e.how}: which of its ranks, its lines say"
            )
        elif e.unit == PROCESS and e.code not in (None, 0):
            where = f" on {e.host}" if e.host else ""
            said.append(f"a process (pid {e.who}{where}) ended by {e.how}, as {e.by} says: its rank is not in the log")
    return list(dict.fromkeys(said))[:2]


def shown_why(log: LogFacts, rank: int) -> str:
    """Why a rank the log shows, but not waiting, is suspected."""
    raised = log.raised.get(rank)
    if raised is not None and raised.cut:
        where = (
            f" in {raised.frames[-1].func} ({raised.frames[-1].file}:{raised.frames[-1].line})" if raised.frames else ""
        )
        if raised.message and raised.message != GRAPH:  # TensorFlow's words before its error's own
            return f"it raised{where}: its traceback is in the log, cut before its exception line"
        return f"it raised {raised.type}: the log is cut before its message"
    waiting = len(log.waiting)
    if rank in log.left:
        return f"its own lines say its training ended ({log.left[rank]}) while {waiting} ranks wait: it left early " + (
            "(fewer batches than its peers: uneven data; DistributedSampler(drop_last=True), or torch's Join)"
        )
    return (
        f"its lines are in the log, but no watchdog line: it was not waiting with the {waiting} "
        f"{'rank' if waiting == 1 else 'ranks'} that timed out"
    )
