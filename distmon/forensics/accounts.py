"""What the log's own accounts say of who held the job up, beside its ranks' waits and
exceptions: the reports torch, Horovod and the launchers print (:mod:`~distmon.forensics.desync`,
:mod:`~distmon.forensics.distributed_debug`, :mod:`~distmon.forensics.horovod`,
:mod:`~distmon.forensics.launcher_lines`), NCCL's own lines and the transports' word on a lost peer
(:mod:`~distmon.forensics.nccl`, :mod:`~distmon.forensics.peers`).

Each says one of: these ranks held the others up (a report names them: proven); no rank is to
blame (every process the log shows failed alike, however each launcher says an end; the program
misused NCCL; the environment refused the job, :mod:`~distmon.forensics.environment`; the first
collective timed out as DDP was built; the model did not fit the GPU as it was placed; the fabric
failed; every rank joined the same collective; a transport lost its peer where no rank is named;
every worker was stopped from outside); or only where to look (a worker a launcher saw fail
first, a local rank or an srun task killed, a lost peer's host, the store's host): suspects. The
readings are written once for every launcher: a launcher's words are data
(:data:`~distmon.forensics.worker_exits.ENDS`), not a rule of their own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from distmon.forensics.devices import gpu_not_taken, model_too_large
from distmon.forensics.environment import refused
from distmon.forensics.failures import (
    NCCL_ERROR,
    TOGETHER,
    alike,
    ended_in_failure,
    failures_of,
    files_refused,
    folded,
    is_own,
    own_failure,
    program_error,
    whom,
)
from distmon.forensics.host_memory import killed_together, node_memory, step_memory
from distmon.forensics.library_steps import in_library_step
from distmon.forensics.logfacts import STEP_CANCELLED, LogFacts
from distmon.forensics.rendezvous import raised_meeting
from distmon.forensics.stores import REACH, SET_UP
from distmon.forensics.suspects import TASK_FAILURE, gone_peer, lost_peers, spared, suspects
from distmon.forensics.tracebacks import Raised
from distmon.forensics.worker_exits import (
    RANK,
    SELF,
    SIGTERM,
    WORKER,
)
from distmon.monitor.state.words import rank_word

TRANSPORT = (
    "every rank issued it, so none holds it up: that points to the transport (the network, NVLink or "
    "InfiniBand), a GPU, or NCCL itself, not to a rank"
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
    found.nobody = (
        log.unjoined().nobody
        or log.nccl.misused()
        or _everyone_joined(log)
        or _usage(log)
        or _signalled(log)
        or node_memory(log)
        or _one_process(log)
        or _unconnected(log)
        or _environment(log)
        or files_refused(log)
        or _ddp_built(log)
        or model_too_large(log)
        or gpu_not_taken(log)
        or in_library_step(log)
        or _library(log)
        or _illegal(log)
        or _announced_twice(log)
        or alike(log)
        or folded(log)
        or step_memory(log)
        or killed_together(log, world)
        or _terminated(log, world)
        or _aborted_cleanly(log)
        or _adapter(log)
        or _fabric(log)
        or _nvlink(log)
        or _nccl_failed(log)
        or log.horovod.diverged(world)
        or _set_up(log)
        or raised_meeting(log)
        or _transport(log, world)
        or program_error(log)
    )
    if found.nobody is None:
        found.suspects = suspects(log, world)
    return found


def _set_up(log: LogFacts) -> str | None:
    """Where a process could not reach the store (or the store its port), or a group's
    store-based barrier counted more arrivals than the world has, and no rank failed of its
    own (a rank raising the store's own words is the set-up's): the set-up; or where every
    failure is one of torch.distributed's checks of how the program set it up."""
    if any(is_own(r) and not (SET_UP.search(r.said) or MISUSED_SET_UP.search(r.said)) for r in log.raised.values()):
        return None
    if any(e.killed and e.unit != WORKER for e in log.exits):
        return None  # a worker crashed or was killed: a restart's rendezvous after it is its aftermath
    check = log.stores.check or REACH
    if log.stores.unreachable is not None:
        return f"{log.stores.unreachable}: {check}: the set-up, not a rank"
    if log.stores.agent_waited and not (log.seen or log.raised or log.exits or log.closed or log.timeouts):
        return (
            "torchrun's agent timed out in the c10d store of its rendezvous before any worker started (its "
            f"traceback is torchrun's own; the log shows no worker): the set-up, not a rank; check {check}"
        )
    return log.stores.barrier_said() or _misused_set_up(log)


MISUSED_SET_UP = re.compile(
    r"trying to initialize the default process group twice|Default process group (?:has not been|is not) initialized"
    r"|environment variable \w{1,40} expected, but not set|Distributed package doesn't have \w{1,20} built in"
    r"|ProcessGroupNCCL is only supported with GPUs, no GPUs found|Invalid backend: |Unknown c10d backend type"
    r"|No backend type associated with device type"
)
"""torch.distributed's checks of how the program set it up (``distributed_c10d.py``,
``rendezvous.py``): the same program and launch in every process fail them alike."""


def _misused_set_up(log: LogFacts) -> str | None:
    """Where every failure the log shows (a rank's, or a process's it does not name) is one of
    torch.distributed's checks of the program's set-up: every process runs the same check."""
    own = [r for r in log.exceptions if is_own(r)]
    if not own or not all(MISUSED_SET_UP.search(r.said) for r in own):
        return None
    ranks = sorted(rank for rank, r in log.raised.items() if is_own(r))
    who = rank_word(ranks) if ranks else "a process"
    return (
        f"{who} raised {own[0].type}: {own[0].message.splitlines()[0][:200]}: torch.distributed's check of how the "
        "program set it up, which every process runs alike: the program or its launch, not a rank"
    )


CTRL_C = 2
"""SIGINT: a person at the launcher's terminal, most often stopping a job that hangs."""
SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 10: "SIGUSR1", 12: "SIGUSR2", 15: "SIGTERM"}
"""The signals a launcher is sent to stop it (torchrun's agent handles these)."""
_SENT_BY = {
    1: "its terminal or ssh session closed: run it under nohup, tmux or the scheduler",
    2: "Ctrl-C",
    15: "the scheduler or a user stopped it: a time limit, a preemption, scancel, kill",
}


_CANCELLED_BY = {
    "TIME LIMIT": "its time limit ran out (--time)",
    "PREEMPTION": "a job of a higher priority preempted it",
    "NODE FAILURE": "a node of the job failed{node}: the node, not a rank; keep the next run off it (sbatch --exclude)",
    "": "a user or an admin cancelled it (scancel)",
}


def _signalled(log: LogFacts) -> str | None:
    """Where Slurm cancelled the job, a launcher itself was signalled (torchrun's agent, the
    deepspeed launcher), a process was exiting as its watchdog still ran, or Ray says its workers
    received SIGTERM, and no rank failed of its own before."""
    if own_failure(log):
        return None
    looked = bool(log.stacks.ranked or log.stacks.unplaced)  # stacks taken as it ran: a hang the signal ended
    hung = looked or (log.cancelled != "NODE FAILURE" and bool(log.waiting))  # a hang the cancel or time limit ended
    if log.cancelled not in (None, TASK_FAILURE, STEP_CANCELLED) and not log.cancelled_after and not hung:
        why = _CANCELLED_BY.get(log.cancelled, log.cancelled.lower()).format(
            node=f" ({log.failed_node})" if log.failed_node else ""
        )
        return f"Slurm cancelled the job: {why}; it ended the job's tasks, no rank failed"
    signalled = _launcher_signalled(log)
    interrupted = signalled is not None and signalled[1] == CTRL_C and _failed_besides(log)  # a hang Ctrl-C ended
    if signalled is not None and not _failed_before(log, log.signalled_at) and not interrupted and not looked:
        who, number = signalled
        name = SIGNALS.get(number, f"signal {number}")
        sent = f"{name}: {_SENT_BY[number]}" if number in _SENT_BY else name
        return f"{who} itself received {sent}; it ended its workers, no rank failed"
    stop = next((r for r in log.exceptions if r.stopped), None) if not looked else None
    if stop is not None and not _failed_besides(log):
        ranks = sorted(rank for rank, r in log.raised.items() if r.stopped)
        who = rank_word(ranks) if ranks else "a process"
        return (
            f"{who} raised {stop.type.rsplit('.', 1)[-1]}: stopped by a signal from outside (the scheduler's "
            "cancel or time limit, a preemption, a user's kill or Ctrl-C), not failed; no rank failed"
        )
    if log.exiting is not None and not log.waiting:
        who, words = log.exiting
        return (
            f"{who} was exiting ({words}): its CUDA context went before its NCCL watchdog stopped, which "
            "torch logs as a process ends; no rank failed"
        )
    stopped = log.ray.stopped()
    if stopped is None:
        return None
    return (
        f"{stopped} received SIGTERM, as Ray says: stopped from outside (Ray shutting its workers down as the job "
        "ended, the scheduler, a user), not failed; no rank failed"
    )


def _failed_besides(log: LogFacts) -> bool:
    """Where processes were stopped by a signal, something that failed besides: a rank waiting, or
    stopped inside a collective (a hang a user interrupted), ranks that lost a peer (the one stopped,
    maybe stuck when it was), a worker killed or crashed (the signals came from its launcher's
    teardown), a native crash, a process killed for memory."""
    return bool(
        log.waiting
        or any(r.stopped and r.collective is not None for r in log.exceptions)
        or any(r.consequence and not r.launchers for r in log.exceptions)  # ranks that lost a peer
        or any(e.code is not None and e.code < 0 and -e.code not in SIGNALS for e in log.exits)
        or log.crashes.crashes
        or log.oom_killed
        or log.step_ended
    )


def _failed_before(log: LogFacts, moment: float | None) -> bool:
    """A worker a launcher saw fail of its own by ``moment`` (another node's, before its agent was
    signalled: the scheduler then stops the job's other nodes)."""
    return moment is not None and any(
        ended_in_failure(e, log) and e.at is not None and e.at <= moment + TOGETHER for e in log.exits
    )


def _launcher_signalled(log: LogFacts) -> tuple[str, int] | None:
    """The launcher that was itself sent a signal, and the signal: torchrun's agent (``Received 1
    death signal``), the deepspeed launcher (``Main process received SIGINT``)."""
    if log.signalled is not None:
        return "torchrun's agent", log.signalled
    launcher = next((e for e in log.exits if e.said == SELF and e.code is not None), None)
    return None if launcher is None or launcher.code is None else (launcher.by, -launcher.code)


def _reports(log: LogFacts, world: int) -> list[tuple[list[int], str]]:
    """The ranks each report names: the monitored barrier (the world's), torch's desync report (its ranks
    global where it is the world group's), Flight Recorder's analyzer, the fingerprint check, fairseq's
    check of the workers' gradient norms, Horovod's stall inspector."""
    failed = log.debug.failed.items() if not _subgroups(log) else ()
    named = [([rank], f"never came to rank 0's monitored barrier ({why})") for rank, why in failed]
    for report in log.desync.reports:
        said = report.culprits()
        # a rank it names waiting itself in the collective it times out at: its ranks are a group's, not the world's
        shown = said is not None and any(report.seq in log.waited_at(r) for r in said[0])
        if said is not None and report.of_world and not shown:
            named.append(said)
    named += log.unjoined().proven
    named += [odd for odd in (log.debug.odd(), log.grad_norms.odd()) if odd is not None]
    held = log.horovod.holding_up(world if world > 1 else None)
    if held is not None:
        named.append(held)
    return named


def _subgroups(log: LogFacts) -> bool:
    """The job has groups besides the world (torch's lines laying them out), or its monitored barrier is
    called on one (``monitored_barrier(group=...)`` in a traceback): the ranks a barrier names are its
    group's, which the log may not map to the job's."""
    return bool(log.layouts) or log.debug.of_group


def _everyone_joined(log: LogFacts) -> str | None:
    for report in log.desync.reports:
        joined = report.everyone_joined()
        if joined is not None and report.of_world:
            return f"{joined}: {TRANSPORT}"
    return None


ILLEGAL = (
    "an illegal instruction (SIGILL): the CPU met an instruction it does not have, a build for another CPU (a wheel "
    "or an extension compiled for newer instructions, AVX-512) or the platform under it (the OS, its threads), which "
    "every process of the job runs alike (where the nodes' CPUs differ, that node's): not a rank"
)
SIGILL = 4


def _illegal(log: LogFacts) -> str | None:
    """Where a process ended by SIGILL, as a launcher or its crash handler says, and no rank failed
    of anything else: the build or the platform."""
    exit = next((e for e in log.exits if e.code == -SIGILL), None)
    crash = next((c for c in log.crashes.crashes if c.signal == SIGILL), None)
    if (exit is None and crash is None) or own_failure(log):
        return None
    if exit is not None:
        who = f"{exit.unit} {exit.who}" if exit.who >= 0 else "a worker"
        return f"{who} ended by signal 4 (SIGILL), as {exit.by} says: {ILLEGAL}"
    assert crash is not None
    return f"a process {crash.said}: {ILLEGAL}"


def _adapter(log: LogFacts) -> str | None:
    """Where a node's InfiniBand adapter said it failed (its fatal async event, as NCCL reads it)
    and no rank failed of its own."""
    if log.nccl.adapter is None or own_failure(log):
        return None
    return f"{ADAPTER}: {log.nccl.adapter}"


ADAPTER = (
    "the node's InfiniBand adapter or its link failed (its own fatal event, or its port gone down: its firmware, its "
    "driver, the card, the cable and the switch's port; `ibstat`, `dmesg` on that node), not a rank"
)


def _fabric(log: LogFacts) -> str | None:
    """Where the only failure the log shows is the fabric's (InfiniBand completion errors): not where a worker
    crashed, was killed or went silent, the one peer they name (a process gone fails the requests to it alike)."""
    if not log.peers.fabric_only or any(not r.consequence for r in log.raised.values()) or gone_peer(log):
        return None
    if any(e.killed and e.unit != WORKER for e in log.exits):
        return None
    return f"{FABRIC}: {log.peers.losses[0].said}"


def _nvlink(log: LogFacts) -> str | None:
    """Where the only failure the log shows is NCCL's NVLS transport's (NVLink SHARP, the node's NVSwitches)."""
    if log.nccl.nvls is None or any(not r.consequence for r in log.raised.values()):
        return None
    return f"{NVLINK}: NCCL's NVLS transport: {log.nccl.nvls}"


LIBRARY = (
    "the library, its transport or the node it runs on (its version, the platform, a driver), not a rank's "
    "program: no frame of the program's is in it"
)


def _library(log: LogFacts) -> str | None:
    """Where the only failure the log shows is a crash in a communication library's own thread."""
    said = log.crashes.in_library()
    if said is None or any(is_own(r) for r in log.raised.values()):
        return None
    return f"{said}: {LIBRARY}"


UNCONNECTED = (
    "the network between the processes as they set up (the interface NCCL picks: NCCL_SOCKET_IFNAME; a firewall; "
    "a route between the nodes), not a rank"
)


def _unconnected(log: LogFacts) -> str | None:
    """Where NCCL could not connect a socket to a peer, or found no interface to bootstrap on, and
    no rank failed of anything but NCCL's errors."""
    said = log.nccl.never_connected()
    if said is None or any(is_own(r) and not NCCL_ERROR.search(f"{r.type}: {r.said}") for r in log.raised.values()):
        return None
    return f"{UNCONNECTED}: {said}"


def _usage(log: LogFacts) -> str | None:
    """Where every failure the log shows is an exit with Python's usage error's code and no
    exception of the rank's own."""
    failures = failures_of(log)
    if not failures or any(f.exception or f.exit != f"exit code {USAGE}" for f in failures):
        return None
    if USAGE in log.environment.exits and (said := log.environment.said()) is not None:
        return said  # the parser's own words say what it refused
    return f"{whom(failures)} exited with code {USAGE}: {USAGE_WHY}"


ONE_PROCESS = (
    "one process drives every GPU the log shows, so no rank's program can hold up another: what failed or hung is "
    "the GPUs, the links between them or NCCL's set-up, not a rank; check peer-to-peer (`nvidia-smi topo -p2p r`, "
    "NCCL_P2P_DISABLE=1 as a test), PCIe ACS and the IOMMU, NCCL's environment variables (NCCL_P2P_LEVEL, "
    "NCCL_SHM_DISABLE), the NCCL build against the driver"
)


def _one_process(log: LogFacts) -> str | None:
    """Where NCCL's lines (or nccl-tests' table of its ranks) show one process driving several GPUs
    and no rank of the log failed of its own: whatever failed or hung, the ranks are one program."""
    process = log.nccl.one_process()
    if process is None or own_failure(log) or log.seen - {0}:
        return None
    return f"{process}: {ONE_PROCESS}"


def _environment(log: LogFacts) -> str | None:
    """Where a line says the environment refused the job (:mod:`~distmon.forensics.environment`)
    and no process failed of anything else of its own (an exception saying the refusal is it)."""
    said = log.environment.said(ran=log.ran, waited=bool(log.waiting))
    if said is None:
        return None
    nccl = log.environment.by_nccl
    own = [
        r
        for r in log.exceptions
        if is_own(r) and not refused(text := f"{r.type}: {r.said}") and not (nccl and NCCL_ERROR.search(text))
    ]
    if own or any(e.killed and e.unit != WORKER for e in log.exits):
        return None
    ends = log.environment.exits
    if ends and any(e.code not in ends and ended_in_failure(e, log) for e in log.exits):
        return None  # a worker ended otherwise than the refusal ends it: a failure of its own
    return said


DDP_BUILT = (
    "the first collective timed out as DistributedDataParallel was built: every rank's DDP broadcasts rank 0's "
    "parameters from its constructor, the group's first collective, so the ranks never reached each other: the "
    "set-up (the address and interface the process group uses: MASTER_ADDR, NCCL_SOCKET_IFNAME or "
    "GLOO_SOCKET_IFNAME, a public address where the hosts talk on a private one; a firewall), not a rank (unless "
    "one rank came to build DDP late, loading or preparing data alone first)"
)
_TIMED_OUT = re.compile(r"[Tt]imed? ?out")
_DDP = "torch/nn/parallel/distributed.py"
_DDP_SYNC = re.compile(r"_sync|broadcast|_verify_params")
"""DDP's constructor's first collectives: the parameters' check across processes and their broadcast."""


def _ddp_built(log: LogFacts) -> str | None:
    """Where every exception the log shows is a timeout in DistributedDataParallel's constructor, in its
    broadcast of rank 0's parameters (or its check of them across processes), and nothing else failed:
    the group's first collective, which every rank issues as it builds the model."""
    raised = [r for r in log.exceptions if not r.cut and r.launcher is None]
    if not raised or not all(_in_ddp_build(r) for r in raised) or log.waiting or log.crashes.crashes:
        return None
    if any(e.killed for e in log.exits):
        return None
    return f"{raised[0].type}: {raised[0].message.splitlines()[0][:200]}: {DDP_BUILT}"


def _in_ddp_build(raised: Raised) -> bool:
    """A timeout raised in DDP's constructor, in one of its first collectives."""
    frames = raised.frames
    built = any(f.file.endswith(_DDP) and f.func == "__init__" for f in frames)
    syncing = any(_DDP_SYNC.search(f.func) for f in frames[-3:])
    return built and syncing and _TIMED_OUT.search(raised.said) is not None


ANNOUNCED_TWICE = (
    "the launch started processes that took the same global rank (each node told it is the first: its node rank, "
    "or the scheduler's tasks per node against the processes each node starts), so the others never came: the "
    "launch, not a rank"
)


def _announced_twice(log: LogFacts) -> str | None:
    """Where two processes announced the same global rank and as many of the world's announced none
    (no restart: no more announcements than the world has)."""
    announced, world = log.announced, log.world
    twice = sorted(r for r, n in announced.items() if n > 1)
    if not twice or world is None or sum(announced.values()) > world or len(announced) >= world:
        return None
    none = world - len(announced)
    return f"{rank_word(twice)} announced by two processes each, {none} of {world} by none: {ANNOUNCED_TWICE}"


STOPPED = (
    "stopped from outside (a user's kill or pkill, the scheduler's cancel, a time limit, a preemption): no rank failed"
)


def _terminated(log: LogFacts, world: int) -> str | None:
    """Where every worker's end the log shows is SIGTERM, two or more or the launcher's first, and
    nothing failed (Slurm says no task did, srun's list leaves out no task between those it ended):
    they were stopped together from outside."""
    ends = [e for e in log.exits if e.code == SIGTERM and e.said != SELF]
    failed = any(ended_in_failure(e, log) for e in log.exits) or bool(log.crashes.crashes)
    failed = failed or log.cancelled == TASK_FAILURE or bool(spared(log, world)) or log.oom_killed is not None
    if (len(ends) < 2 and not any(e.first for e in ends)) or failed or own_failure(log) or log.waiting:
        return None  # one worker's SIGTERM stands alone where it was the launcher's first failure: sent it first
    named = sorted({e.who for e in ends if e.unit == RANK})
    who = rank_word(named) if len(named) == len(ends) else f"{len(ends)} workers"
    return f"{who} ended by SIGTERM, as {ends[0].by} says: {STOPPED}"


def _aborted_cleanly(log: LogFacts) -> str | None:
    """Where a rank ended the job with ``MPI_Abort`` and error code 0 and nothing else failed: the
    program's own way to stop every process once its work was done."""
    clean = next((e for e in log.exits if e.aborted and e.code == 0), None)
    if clean is None or own_failure(log) or any(ended_in_failure(e, log) for e in log.exits) or log.waiting:
        return None
    return (
        f"rank {clean.who} ended the job with MPI_Abort and error code 0, as {clean.by} says: the program's own way "
        "to stop every process once its work is done (a framework that finishes so), not a failure; no rank failed"
    )


NCCL_FAILED = (
    "the network between the processes or NCCL's set-up (the interface it picks: NCCL_SOCKET_IFNAME; its "
    "transports' variables, NCCL_P2P_LEVEL, NCCL_IB_HCA; a firewall), or a peer that went away, not a rank"
)


def _nccl_failed(log: LogFacts) -> str | None:
    """Where NCCL's trace, or torch's error quoting NCCL's result, says a call of its set-up or transport
    failed (a system call, its own state, a peer gone) and no rank failed of anything but NCCL's errors."""
    returned = log.nccl.returned or log.nccl.result
    if returned is None or _own_beyond_nccl(log) or log.waiting:
        return None
    if log.nccl.returned is None and (any(ended_in_failure(e, log) for e in log.exits) or _silent(log)):
        return None  # torch's quote alone: a process a launcher saw fail, or a rank shown that raised no NCCL
        # error, may be the peer NCCL lost
    return f"NCCL's call failed ({returned}): {NCCL_FAILED}"


def _silent(log: LogFacts) -> set[int]:
    """The ranks the log shows that raised no NCCL error."""
    raised = {rank for rank, r in log.raised.items() if NCCL_ERROR.search(f"{r.type}: {r.said}")}
    return log.seen - raised


def _own_beyond_nccl(log: LogFacts) -> bool:
    """A process failed of its own of something else than NCCL's errors, or a launcher saw one killed."""
    raised = log.exceptions
    own = any(is_own(r) and not NCCL_ERROR.search(f"{r.type}: {r.said}") for r in raised)
    return own or any(e.killed for e in log.exits) or bool(log.crashes.crashes)


TRANSPORT_LOST = (
    "the network between the hosts, or that peer's process or node went away (its own log says which), not a rank "
    "the log shows"
)


def _transport(log: LogFacts, world: int) -> str | None:
    """Where the only failure the log shows is a transport's connection to a peer lost (gloo's pair,
    NCCL's socket, a remote error), in a log that names no rank (where it names the witness, the
    peer is one of the ranks it does not show, suspected) nor places one on the peer's host: the
    network or the peer's host."""
    peers = log.peers.peers()
    remote = any(r.consequence and NCCL_ERROR.search(f"{r.type}: {r.said}") for r in log.unplaced)
    if not (peers or remote) or log.seen or _own_beyond_nccl(log) or lost_peers(log, world):
        return None
    if log.stores.lost or log.stores.waits or any(ended_in_failure(e, log) for e in log.exits):
        return None
    lost = f"the connection to {peers[0]} was lost" if peers else "a peer was lost (NCCL's remote error)"
    return f"{lost}: {TRANSPORT_LOST}"
