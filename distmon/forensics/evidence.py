"""Why each culprit of a post-mortem is one, read off the dumps: what a person does next
depends on it. A rank whose host stopped enqueuing while its peers went on points at its
code or its host (a thread stuck, the GIL held, I/O, a path only some ranks take); a rank
whose device stopped completing work its peers completed points at the hardware (a node to
drain before the restart); a rank with no dump was killed or lost its node.

The monitor names the culprits (the same wait-for relation as live); this says why, from
the groups each culprit shares with the ranks that wait for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from distmon.flightrecorder.fields import Entry, created_at, entry_op, number, text_field
from distmon.forensics.analysis import Analysis, RankFacts
from distmon.forensics.failures import SIGKILL, TOGETHER, device_fault
from distmon.forensics.grad_norms import CHECK_IT, ODD_NORM
from distmon.forensics.worker_exits import OOM_KILLER, PROCESS, RANK, WorkerExit
from distmon.monitor.rules.failures import KILLED, KILLER
from distmon.monitor.state.whereabouts import frame_lines
from distmon.monitor.state.words import duration, first_line, group_name, in_flight, rank_word
from distmon.wire import GroupStatus, expand_runs

HARDWARE = "hardware"
CODE = "code"
UNKNOWN = "unknown"
RAISED = "it raised"
"""How a culprit's evidence begins where the rank raised: what its place already says."""
ASSERTED = (
    "find the failing op: the assert's own line (`Assertion ... failed`) names the kernel; rerun with "
    "CUDA_LAUNCH_BLOCKING=1, or on CPU, to raise at it; most often a label or an index out of range in this "
    "rank's batch"
)
"""What to do where a kernel's own bounds check failed (a device-side assert): the program's, not the GPU's."""
_NOT_FINITE = re.compile(r"\bnan\b|\binf\b|not finite|non-finite", re.IGNORECASE)
"""A rank's own check that its numbers are not finite (Megatron's ``found NaN in local grad norm``)."""
ASSERT_TRIGGERED = "device-side assert triggered"
"""CUDA's words for a kernel's failed assert; not torch's trailer under every CUDA error since 2.0 (``Compile with
`TORCH_USE_CUDA_DSA` to enable device-side assertions``)."""


@dataclass
class Evidence:
    """One culprit: why, in a line; the facts that show it; what it points at; what to do."""

    rank: int
    why: str
    facts: list[str]
    points_at: str
    """:data:`HARDWARE` (a node to drain), :data:`CODE` (the script or its host), or :data:`UNKNOWN`."""
    next_step: str

    def lines(self) -> list[str]:
        return [f"rank {self.rank}: {self.why}", *("  " + f for f in self.facts), f"  Next: {self.next_step}"]

    def to_json(self) -> dict[str, object]:
        return {
            "rank": self.rank,
            "why": self.why,
            "facts": self.facts,
            "points_at": self.points_at,
            "next": self.next_step,
        }


def evidence(analysis: Analysis, culprits: list[int], reported: dict[int, str] | None = None) -> list[Evidence]:
    """The evidence for each of ``culprits`` that the dumps hold, or the report of the log that
    names it (``reported``); a rank known from a log only is worded by the monitor's own alert."""
    found = []
    for rank in culprits:
        if reported and rank in reported:
            found.append(_reported(rank, reported[rank], analysis))
            continue
        f = analysis.ranks.get(rank)
        if f is None:
            if rank in analysis.missing:
                found.append(_no_dump(rank, analysis.missing[rank]))
            continue
        if f.dump is None:  # a log's rank: only what its and its peers' watchdog lines show
            said = _device_error(f, analysis) or _raised(f, analysis) or _killed(f, analysis)
            if said is None and not _crashed(f, analysis):  # a process that crashed is not hanging
                said = _host_stopped(f, analysis)
            if said is not None:
                found.append(said)
            continue
        found.append(_device_stopped(f, analysis) or _host_stopped(f, analysis) or _unexplained(f))
    return found


def _reported(rank: int, why: str, analysis: Analysis) -> Evidence:
    """A rank a report of the log names: the report's words, and what its own lines show (where it
    raised, its exception: why it never came)."""
    f = analysis.ranks.get(rank)
    raised = _raised(f, analysis) if f is not None and f.dump is None else None
    if raised is not None:
        return Evidence(rank, why, [f"{raised.why}, at:", *raised.facts], raised.points_at, raised.next_step)
    killed = _killed(f, analysis) if f is not None and f.dump is None else None
    if killed is not None:  # not hanging: no stack of it to take
        return Evidence(rank, why, [f"{killed.why}:", *killed.facts], killed.points_at, killed.next_step)
    own = "its own lines are in the log" if rank in analysis.log.seen else "no line of its own in the log"
    if why.startswith(ODD_NORM):  # not held up: its numbers were its own
        return Evidence(rank, why, [f"{own}; its peers' gradients agreed with each other"], CODE, CHECK_IT)
    return Evidence(
        rank,
        why,
        [f"{own}; the others wait for it or went on without it"],
        CODE,
        "find where it stopped short of its peers: its stack while it hangs (`py-spy dump --pid PID` on its host), "
        "its own log for an error or its exit; a code path only some ranks take (if rank == 0: checkpoint, "
        "evaluation, logging) is the usual cause",
    )


def _device_stopped(f: RankFacts, analysis: Analysis) -> Evidence | None:
    """Its oldest work is a collective its peers completed: the host enqueued it, the device
    never finished it."""
    held = f.dump.oldest_pending if f.dump else None
    group = next((g for g in f.groups if held is not None and g.id == _group_of(held)), None)
    if held is None or group is None:
        return None
    if held.get("is_p2p"):
        seq = number(held, "p2p_seq_id")
        done = [r for r, peer in _peers(group, analysis) if r != f.rank and _p2p_done(peer, group.id) >= seq]
        what, behind = f"point-to-point op #{seq} {_op(held)}", "its later work waits behind it on the device"
    else:
        seq = number(held, "collective_seq_id")
        done = [r for r, peer in _peers(group, analysis) if (g := _same(peer, group)) and g.completed >= seq]
        what = f"collective #{seq} {_op(held)}"
        behind = f"{group.enqueued - seq} more of its collectives in that group wait behind it on the device"
    if not done:
        return None
    waited = analysis.t - created_at(held)
    return Evidence(
        f.rank,
        "its device stopped completing the work its host enqueued",
        [
            f"{what} of {group_name(group.id, group)} was enqueued {duration(waited)} before the dump "
            f"and never completed on rank {f.rank}, while {rank_word(done)} completed it",
            behind,
        ],
        HARDWARE,
        "drain its node before the restart; on its host, `nvidia-smi -q` (ECC, retired pages, "
        "the GPU's state) and `dmesg | grep -i xid` for the GPU's errors",
    )


def _device_error(f: RankFacts, analysis: Analysis) -> Evidence | None:
    """Its watchdog found its own device failed (``CUDA error: ...``), or it raised its GPU's own
    hardware fault (an ECC error, an Xid): the peers' timeouts follow from it, and the GPU, not
    the code, is what to look at."""
    raised = analysis.log.raised.get(f.rank)
    hardware = device_fault(analysis.log, {f.rank})
    if raised is None or (raised.type != "CUDA error" and not hardware):
        return None
    where = frame_lines(raised.frames, depth=3, indent="") if raised.frames else []
    if ASSERT_TRIGGERED in raised.said:
        return Evidence(
            f.rank,
            f"a kernel's own check failed on its device: {raised.type}: {first_line(raised.message)}",
            [
                "a device-side assert is a bounds check in a kernel, not the GPU failing; any peer that timed out "
                "waited for it",
                *where,
            ],
            CODE,
            ASSERTED,
        )
    return Evidence(
        f.rank,
        f"its device failed: {raised.type}: {first_line(raised.message)}",
        [
            "its own NCCL watchdog found the error on its GPU and took the process down; any peer that "
            "timed out waited for it"
            if raised.type == "CUDA error"
            else "its GPU reported a hardware fault; any peer that timed out waited for it",
            *where,
        ],
        HARDWARE,
        "drain its node before the restart: on its host `nvidia-smi -q -d ECC` (ECC errors, retired pages) and "
        "`dmesg | grep -i xid`"
        if hardware
        else "drain its node before the restart if the error comes again on the same GPU: on its host "
        "`nvidia-smi -q` (ECC, retired pages) and `dmesg | grep -i xid`; an illegal memory access may be a "
        "kernel's bug instead: rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel",
    )


def _raised(f: RankFacts, analysis: Analysis) -> Evidence | None:
    """It raised an exception of its own (its traceback is in the log, its exception line there or
    cut): where in its code is what to read; it is not hanging, so no stack of it is to be had."""
    raised = analysis.log.raised.get(f.rank)
    if raised is None or raised.consequence or raised.launcher is not None or not raised.frames:
        return None
    said = "its exception line is not in the log" if raised.cut else f"{raised.type}: {first_line(raised.message)}"
    others = "; the others' waits follow from it" if analysis.log.waiting else ""
    if "CUDA out of memory" in raised.message:
        peers = ", its peers' did not" if analysis.log.waiting or analysis.log.went_on else ""  # shown so
        fix = (
            f"its GPU ran out of memory{peers}: another process on that GPU (the "
            "message's `Process N has ... in use`), a batch or sequence longer than its peers', fragmentation "
            "(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True); else a smaller micro-batch"
        )
    elif ASSERT_TRIGGERED in raised.message:
        fix = ASSERTED
    elif _NOT_FINITE.search(raised.message):  # its own numbers, before the ranks shared them
        fix = CHECK_IT
    else:
        fix = (
            "read its exception whole in its own output (its stderr; under torchrun, its lines prefixed "
            f"[rank{f.rank}]) and fix it where it raised"
        )
    fix += others
    return Evidence(f.rank, f"{RAISED} ({said})", frame_lines(raised.frames, depth=4, indent=""), CODE, fix)


HOST_MEMORY = (
    "its node's host memory ran out: what each rank holds there (the dataset loaded whole, DataLoader workers times "
    "their prefetch, pinned memory, a checkpoint gathered on CPU) against the node's or its container's memory; "
    "`free -g` and `dmesg -T` on that node"
)
"""What to do where the kernel's OOM killer killed a rank."""


def _killed(f: RankFacts, analysis: Analysis) -> Evidence | None:
    """A launcher says a signal from outside it ended it (SIGKILL: no process sends it itself nor catches it): it
    is not hanging, so no stack of it is to be had; the ranks of its host killed in the same second say the host."""
    log = analysis.log
    end = next((e for e in log.exits if e.unit == RANK and e.who == f.rank and e.signal_number == SIGKILL), None)
    if end is None:
        return None
    host = f" on {end.host}" if end.host else ""
    others = [
        e.who
        for e in log.exits
        if e.unit == RANK and e.who != f.rank and e.host == end.host and e.signal_number == SIGKILL and _close(e, end)
    ]
    facts = [f"{end.by} says it ended by {end.how}{host}"]
    oom = end.pid is not None and any(e.unit == PROCESS and e.by == OOM_KILLER and e.who == end.pid for e in log.exits)
    if oom:
        facts.append(f"the kernel's log in the paste says its out-of-memory killer killed process {end.pid}, this one")
    if others:
        facts.append(f"{rank_word(others)}{host} were killed in the same second: the host's memory, or the host")
    why, next_step = (
        ("the kernel's out-of-memory killer killed it", HOST_MEMORY)
        if oom
        else (f"it was {KILLED}", f"find who killed it: {KILLER}")
    )
    return Evidence(f.rank, why, facts, UNKNOWN, next_step)


def _crashed(f: RankFacts, analysis: Analysis) -> bool:
    """A launcher says a signal of its own ended the rank (a native crash: SIGSEGV, SIGBUS): the failure's own
    words say what to do, no stack of it is to be had."""
    return any(e.unit == RANK and e.who == f.rank and e.killed for e in analysis.log.exits)


def _close(a: WorkerExit, b: WorkerExit) -> bool:
    return a.at is not None and b.at is not None and abs(a.at - b.at) <= TOGETHER


def _host_stopped(f: RankFacts, analysis: Analysis) -> Evidence | None:
    """A group whose peers enqueued past the rank and wait in the next collective: its host
    never enqueued it."""
    for group in f.groups:
        ahead = [
            (r, g) for r, peer in _peers(group, analysis) if (g := _same(peer, group)) and g.enqueued > group.enqueued
        ]
        if not ahead:
            continue
        waiting = [(r, g) for r, g in ahead if in_flight(g)]
        seq = min((g.completed + 1 for _, g in waiting), default=group.enqueued + 1)
        op = next((g.op for _, g in waiting if g.op), None)
        pending = [e for r, _ in waiting if (e := _pending_entry(analysis.ranks[r], group.id)) is not None]
        since = min((created_at(e) for e in pending if created_at(e) > 0), default=0.0)
        since = since or min((g.since for _, g in waiting if g.since), default=0.0)
        waited = f" for {duration(analysis.t - since)}" if since else ""
        sizes = f" {_op(pending[0])}" if pending else f" ({op})" if op else ""
        they = rank_word([r for r, _ in waiting])
        waits = f"; {they} {'waits' if len(waiting) == 1 else 'wait'} in #{seq}{sizes}{waited}" if waiting else ""
        if f.dump is None:
            own = "it stopped short of what its peers went on to"
        elif f.dump.oldest_pending is None:
            own = "nothing of its own in flight"
        else:
            own = "its own work queued"
        return Evidence(
            f.rank,
            "its host stopped enqueuing while its peers went on",
            [
                f"its last work in {group_name(group.id, group)} is #{group.enqueued}; "
                f"{rank_word([r for r, _ in ahead])} enqueued up to #{max(g.enqueued for _, g in ahead)}{waits}",
                f"{own}: the rank is in its own code (a stuck thread, the GIL held, I/O, or a path "
                "only some ranks take)",
            ],
            CODE,
            "take its stack while it hangs (`py-spy dump --pid PID` on its host); run the job with "
            "distmon to see where it stops next time",
        )
    return None


def _unexplained(f: RankFacts) -> Evidence:
    return Evidence(
        f.rank,
        "the others wait for it, and its dump does not say why",
        [f"its dump: {f.source}"],
        UNKNOWN,
        "read its own log for an error, and take its stack if it still runs (`py-spy dump --pid PID`)",
    )


def _no_dump(rank: int, why: str) -> Evidence:
    return Evidence(
        rank,
        f"waited for by the others; left no evidence ({why})",
        ["a rank that wrote no dump was killed, crashed before the watchdog fired, or lost its node"],
        UNKNOWN,
        "look for its exit in the launcher's log (exit code, signal) and for its node in `dmesg` "
        "(the OOM killer, hardware errors)",
    )


def _peers(group: GroupStatus, analysis: Analysis) -> list[tuple[int, RankFacts]]:
    return [(r, analysis.ranks[r]) for r in expand_runs(group.ranks) if r in analysis.ranks]


def _p2p_done(f: RankFacts, gid: str) -> int:
    """The point-to-point ops of a group of two a rank completed (both ends count them alike)."""
    return max((c.completed for c in (f.dump.p2p if f.dump else []) if c.group == gid), default=0)


def _same(f: RankFacts, group: GroupStatus) -> GroupStatus | None:
    return next((g for g in f.groups if g.id == group.id), None)


def _group_of(entry: Entry) -> str:
    pg = entry.get("process_group")
    name = pg[0] if isinstance(pg, list | tuple) and pg else None
    return name if isinstance(name, str) else ""


def _pending_entry(f: RankFacts, gid: str) -> Entry | None:
    return f.dump.pending.get(gid) if f.dump else None


def _op(entry: Entry) -> str:
    """``(_all_gather_base, 2048x5120 BFloat16)``: the op, its first input's shape and dtype."""
    sizes, dtypes = entry.get("input_sizes"), entry.get("input_dtypes")
    shape = ""
    if isinstance(sizes, list) and sizes and isinstance(sizes[0], list):
        dims = [str(d) for d in sizes[0][:8] if type(d) is int]
        shape = "x".join(dims)
    dtype = dtypes[0] if isinstance(dtypes, list) and dtypes and isinstance(dtypes[0], str) else ""
    what = ", ".join(
        p for p in (entry_op(entry) or text_field(entry, "profiling_name"), shape + (f" {dtype}" if dtype else "")) if p
    )
    return f"({what})" if what else ""
