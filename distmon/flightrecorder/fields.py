"""A dump's fields, read by type into the wire's records (:class:`~distmon.wire.GroupStatus` per
group, :class:`~distmon.wire.P2P` per channel): the data :mod:`distmon.flightrecorder.loading`
built, never trusted to hold what its keys promise.

``pg_status`` counts from the sequence number of the group's last work, which for a
point-to-point op is the p2p counter (NCCL) or a counter of both (gloo): collectives are
counted from the entries' ``collective_seq_id`` instead.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from distmon.wire import P2P, RECV, SEND, GroupStatus, rank_runs

MAX_NAME = 1024
"""The longest name (group, op, description) read; longer ones are taken as absent."""
MAX_GROUP_RANKS = 1 << 20
"""Members a group's ``ranks`` may list."""
LATEST_ENTRIES = 64
"""Entries, from the newest, in which the dump's latest moment is looked for."""
InFlight = tuple[int, float]
"""(ops not completed, when the oldest was enqueued)."""
_P2P_NAME = re.compile(r":(send|recv) (\d+)(?:->|<-)(\d+)")
_RANKS = re.compile(r"-?\d+")
_HUGE = 1 << 62
_INTEGER = re.compile(r"-?\d{1,18}")
Entry = dict[str, Any]


def text_field(entry: Any, key: str) -> str | None:
    """A string field, or None when absent, not a string, or too long to be a name."""
    value = entry.get(key) if type(entry) is dict else None
    return value if type(value) is str and len(value) <= MAX_NAME else None


def number(entry: Any, key: str, default: int = 0) -> int:
    """An integer field (bools and floats as numbers, and decimal strings: torch's JSON dump
    writes ``pg_status`` counts as ``"12"``), ``default`` when absent or not a number."""
    value = entry.get(key) if type(entry) is dict else None
    if type(value) is int and -_HUGE < value < _HUGE:  # the common case, first
        return value
    if type(value) is str and _INTEGER.fullmatch(value):
        return int(value)
    if isinstance(value, bool | int | float) and value == value and abs(value) < _HUGE:
        return int(value)
    return default


def entry_group(entry: Entry) -> str:
    """The name of the entry's group (its ``process_group`` is a (name, desc) pair)."""
    pg = entry.get("process_group")
    name = pg[0] if type(pg) in (tuple, list) and pg else None
    return name if type(name) is str and len(name) <= MAX_NAME else ""


def group_desc(entry: Entry) -> str | None:
    pg = entry.get("process_group")
    desc = pg[1] if isinstance(pg, list | tuple) and len(pg) > 1 else None
    return desc if isinstance(desc, str) and 0 < len(desc) <= MAX_NAME else None


def names_of(entries: list[Entry]) -> dict[str, str]:
    """pg_id (as ``pg_status`` spells it) -> group name, from the entries."""
    names: dict[str, str] = {}
    for e in entries:
        pg_id, name = e.get("pg_id"), entry_group(e)
        if isinstance(pg_id, int | str) and name:
            names.setdefault(str(pg_id), name)
    return names


def entry_op(entry: Entry) -> str | None:
    """``nccl:all_reduce`` -> ``all_reduce``."""
    name = text_field(entry, "profiling_name")
    return name.split(":")[-1] or None if name else None


def enqueued(status: Any) -> int:
    return number(status, "last_enqueued_collective")


def last_started(status: Any) -> int | None:
    """``last_started_collective``: -1 unless the backend times collectives (NCCL with
    ``TORCH_NCCL_ENABLE_TIMING``), so absent then."""
    value = number(status, "last_started_collective", -1)
    return value if value >= 0 else None


def p2p_batch(entry: Entry) -> bool:
    """NCCL's record of a batch of point-to-point ops (``nccl:coalesced``, no sizes)."""
    name = text_field(entry, "profiling_name") or ""
    return name.endswith(":coalesced") and not entry.get("input_sizes")


def done(entry: Entry) -> bool:
    """Completed: retired by the watchdog, or its completion seen."""
    return (
        bool(entry.get("retired"))
        or text_field(entry, "state") == "completed"
        or number(entry, "time_discovered_completed_ns") > 0
    )


def collectives_of(entries: list[Entry], name: str) -> dict[int, Entry]:
    """The group's collectives in a dump, by sequence number: not its point-to-point ops, nor
    NCCL's record of a batch of them (``nccl:coalesced`` with no sizes, which carries the
    number of the collective before it)."""
    return {
        number(e, "collective_seq_id"): e
        for e in entries
        if entry_group(e) == name and not e.get("is_p2p") and not p2p_batch(e)
    }


P2POp = tuple[Entry, bool]
"""A point-to-point op's entry, and whether it completed."""


def p2p_ops(entries: list[Entry], name: str, ranks: list[int]) -> dict[tuple[int, str], list[P2POp]]:
    """Group ``name``'s point-to-point ops per channel (the peer's global rank, ``send`` or
    ``recv``), in the order posted, each with whether it completed: an op of a
    ``batch_isend_irecv`` is never retired itself (it has no CUDA events of its own), the
    batch's ``nccl:coalesced`` entry, which shares its ``p2p_seq_id``, says for them all.

    An op is named ``nccl:send 0->1`` or ``nccl:recv 0<-1`` in ranks of the group."""
    return _by_channel([e for e in entries if entry_group(e) == name], ranks)


def _by_channel(mine: list[Entry], ranks: list[int]) -> dict[tuple[int, str], list[P2POp]]:
    """:func:`p2p_ops` of one group's entries."""
    batches = {number(e, "p2p_seq_id"): e for e in mine if p2p_batch(e)}
    out: dict[tuple[int, str], list[P2POp]] = {}
    for e in mine:
        parsed = _p2p_name(text_field(e, "profiling_name") or "") if e.get("is_p2p") else None
        if parsed is None:
            continue
        direction, peer = parsed
        if 0 <= peer < len(ranks):
            state = batches.get(number(e, "p2p_seq_id"), e) if batches else e
            out.setdefault((ranks[peer], direction), []).append((e, done(state)))
    return out


@functools.lru_cache(maxsize=4096)
def _p2p_name(name: str) -> tuple[str, int] | None:
    """``nccl:send 0->1`` -> (``send``, 1): a ring repeats a few names thousands of times."""
    match = _P2P_NAME.search(name)
    return (match.group(1), int(match.group(3))) if match else None


def p2p_in_flight(entries: list[Entry], name: str, ranks: list[int]) -> dict[tuple[int, str], InFlight]:
    """NCCL's point-to-point ops of group ``name`` not completed, per channel: how many, and
    when the oldest was enqueued."""
    out: dict[tuple[int, str], InFlight] = {}
    for key, ops in p2p_ops(entries, name, ranks).items():
        pending = [created_at(e) for e, completed in ops if not completed]
        if pending:
            out[key] = (len(pending), min(pending))
    return out


def created_at(entry: Entry) -> float:
    """When the entry was enqueued, in unix seconds (0 when unknown, or outside the years a dump may be written
    in: a corrupt field)."""
    t = number(entry, "time_created_ns") / 1e9
    return t if EARLIEST <= t <= LATEST else 0.0


EARLIEST, LATEST = 946_684_800.0, 4_102_444_800.0
"""2000-01-01 and 2100-01-01, in unix seconds."""


def group_ranks(config: Any) -> list[int] | None:
    """A ``pg_config`` record's global ranks (written as the string ``"[0, 4, 8]"``)."""
    ranks = config.get("ranks") if isinstance(config, dict) else None
    if isinstance(ranks, list) and len(ranks) <= MAX_GROUP_RANKS:
        found = [r for r in ranks if isinstance(r, int) and not isinstance(r, bool)]
    elif isinstance(ranks, str) and len(ranks) <= 16 * MAX_GROUP_RANKS:
        found = [int(r) for r in _RANKS.findall(ranks)]
    else:
        return None
    members = sorted({r for r in found if 0 <= r < 1 << 31})
    return members or None


@dataclass
class RankDump:
    """What one rank's dump says, as the wire's records: the monitor judges it as it judges
    a live rank."""

    groups: list[GroupStatus] = field(default_factory=list)
    p2p: list[P2P] = field(default_factory=list)
    t: float | None = None
    """The latest moment the dump records (an enqueue or a completion), unix seconds."""
    last_started: Entry | None = None
    last_completed: Entry | None = None
    oldest_pending: Entry | None = None
    """The work the rank is held up in: its oldest not completed. What it enqueued after that
    waits behind it (one stream per device), so only this one is reported waited in."""
    pending: dict[str, Entry] = field(default_factory=dict)
    """Group name -> its oldest collective not completed (its op, sizes and dtypes)."""
    unnamed: list[str] = field(default_factory=list)
    """pg_ids whose ``pg_status`` shows work that neither the entries nor ``pg_config`` name."""
    version: str | None = None


def read_dump(dump: dict[str, Any], members: dict[str, list[int]], rank: int | None = None) -> RankDump:
    """One rank's dump as :class:`GroupStatus` per group and :class:`P2P` per channel.

    Every group of ``pg_status`` is reported, also one whose work has all left the ring (a
    dump of active work only, as torch writes on a timeout, holds none of a group that had
    nothing in flight): its counts are ``pg_status``'s. ``members`` maps group names to their
    global ranks (every dump's ``pg_config`` merged: the CPU recorder leaves its own empty);
    a group found in none has only this rank. ``rank`` (a dump does not hold it: its file
    name does) places the rank in a group of two whose work has all left the ring."""
    entries: list[Entry] = dump.get("entries", [])
    status = dump.get("pg_status", {})
    out = RankDump(version=text_field(dump, "version"))
    by_group: dict[str, list[Entry]] = {}
    named: dict[str, str] = {}
    pending: list[Entry] = []
    for e in entries:  # one pass: a dump of 8192 ranks holds 16 million entries
        name = entry_group(e)
        if name:
            by_group.setdefault(name, []).append(e)
            pg_id = e.get("pg_id")
            if type(pg_id) in (int, str):
                named.setdefault(str(pg_id), name)
        if e.get("retired") is not True and not done(e) and not (p2p_batch(e) and not e.get("is_p2p")):
            pending.append(e)
            if name and not e.get("is_p2p"):
                out.pending.setdefault(name, e)
    out.last_completed = next((e for e in reversed(entries) if done(e)), None)
    out.last_started = next(
        (
            e
            for e in reversed(entries)
            if number(e, "time_discovered_started_ns") > 0 or text_field(e, "state") == "started"
        ),
        None,
    )
    names = pg_names(dump, named)
    out.unnamed = sorted(str(k)[:MAX_NAME] for k, v in status.items() if str(k) not in names and enqueued(v) > 0)
    times = [t for e in entries[-LATEST_ENTRIES:] for t in _times(e)]
    out.t = max(times) if times else None
    out.oldest_pending = min(pending, key=created_at) if pending else None
    held = out.oldest_pending
    descs = _descriptions(dump)
    for pg_id, name in sorted(names.items(), key=lambda item: item[1]):
        mine = by_group.pop(name, [])
        if not mine and enqueued(status.get(pg_id)) <= 0:
            continue  # nothing recorded: a rank that never used the group says nothing of it
        ranks = members.get(name) or []
        out.groups.append(_group(name, mine, ranks, status.get(pg_id), held, descs.get(name)))
        out.p2p += _channels(name, mine, ranks, held) if mine else _settled(name, ranks, status.get(pg_id), rank)
    for name, mine in by_group.items():  # entries whose pg_id pg_status does not list
        ranks = members.get(name) or []
        out.groups.append(_group(name, mine, ranks, None, held, descs.get(name)))
        out.p2p += _channels(name, mine, ranks, held)
    return out


def pg_names(dump: dict[str, Any], named: dict[str, str] | None = None) -> dict[str, str]:
    """pg_id -> group name for every group of ``pg_status``. The entries name the ids they
    carry; the others are named by order: a rank numbers its groups in the order it creates
    them, and torch names groups by a counter every rank advances in that same order, so
    this rank's ids and the names in its ``pg_config`` sort alike. The order is trusted only
    where it agrees with every id the entries name (``named``, when already read off them)."""
    named = names_of(dump.get("entries", [])) if named is None else named
    status, config = dump.get("pg_status", {}), dump.get("pg_config", {})
    ids = sorted((str(k) for k in status), key=_numeric)
    groups = sorted((str(k) for k in config), key=_numeric)
    if len(ids) == len(groups) and all(k.isascii() and k.isdigit() for k in [*ids, *groups]):
        by_order = dict(zip(ids, groups, strict=True))
        if all(by_order.get(pg_id) == name for pg_id, name in named.items()):
            return by_order
    return named


def _numeric(key: str) -> tuple[int, str]:
    return (int(key), key) if key.isascii() and key.isdigit() and len(key) < 19 else (1 << 62, key)


def _descriptions(dump: dict[str, Any]) -> dict[str, str]:
    out = {}
    for name, config in dump.get("pg_config", {}).items():
        desc = text_field(config, "desc") if isinstance(config, dict) else None
        if isinstance(name, str) and desc:
            out[name] = desc
    return out


def _times(entry: Entry) -> list[float]:
    keys = ("time_created_ns", "time_discovered_started_ns", "time_discovered_completed_ns")
    return [number(entry, k) / 1e9 for k in keys if number(entry, k) > 0]


def _group(
    name: str, entries: list[Entry], ranks: list[int], status: Any, held: Entry | None, desc: str | None
) -> GroupStatus:
    """Collectives counted from the entries (``pg_status`` counts the last work, a p2p op's
    number when that was one); a group with no entry in the dump from ``pg_status``. The
    oldest incomplete collective names ``op``; ``since`` is set only where it is the work the
    rank is held up in. A coalesced collective (several entries sharing a number) completes
    with its ``coalesced`` entry when there is one."""
    issued, open_seqs = 0, set()
    for e in entries:  # the ring's completed collectives need only their number
        seq = number(e, "collective_seq_id")
        issued = max(issued, seq)
        if not e.get("is_p2p") and not done(e) and not p2p_batch(e):
            open_seqs.add(seq)
    seqs: dict[int, list[Entry]] = {seq: [] for seq in open_seqs}
    for e in entries:
        if number(e, "collective_seq_id") in seqs and not e.get("is_p2p") and not p2p_batch(e):
            seqs[number(e, "collective_seq_id")].append(e)
    if entries:
        pending = sorted(seq for seq, ops in seqs.items() if not _completed(ops))
        completed = pending[0] - 1 if pending else issued
    else:
        issued = enqueued(status)
        completed = min(issued, number(status, "last_completed_collective"))
        pending = []
    last = entries[-1] if entries else {}
    backend, colon, _ = (text_field(last, "profiling_name") or "").partition(":")
    timeout = number(last, "timeout_ms", -1)
    group = GroupStatus(
        id=name,
        backend=backend if colon and backend else "unknown",
        size=max(1, len(ranks)),
        ranks=rank_runs(ranks),
        timeout=timeout / 1000 if timeout >= 0 else None,
        enqueued=issued,
        completed=max(0, completed),
        started=last_started(status),
        desc=group_desc(last) or desc,
    )
    if pending:
        first = seqs[pending[0]]
        inner = [e for e in first if not (text_field(e, "profiling_name") or "").endswith(":coalesced")]
        group.op = entry_op((inner or first)[0])
        if held is not None and any(e is held for e in first):
            group.since = created_at(first[0]) or None
    return group


def _completed(ops: list[Entry]) -> bool:
    batch = [e for e in ops if (text_field(e, "profiling_name") or "").endswith(":coalesced")]
    return done(batch[-1]) if batch else all(done(e) for e in ops)


def _settled(name: str, ranks: list[int], status: Any, rank: int | None) -> list[P2P]:
    """A group of two with nothing left in the ring: whatever its last work was, all of it
    completed, and both ends count their sends and receives alike, so ``pg_status``'s count
    says how far the rank went with its peer. Without it, a peer's receive that this rank's
    send completed would seem to wait for this rank. (Where the last work was a collective
    the count is the collectives', which no send or receive of the peer's waits on.)"""
    if len(ranks) != 2 or rank not in ranks:
        return []
    count = min(enqueued(status), number(status, "last_completed_collective"))
    if count <= 0:
        return []
    peer = ranks[1 - ranks.index(rank)]
    return [P2P(group=name, peer=peer, dir=d, posted=count, completed=count) for d in (SEND, RECV)]


def _channels(name: str, entries: list[Entry], ranks: list[int], held: Entry | None) -> list[P2P]:
    """A group's channels, numbered so that one end's op can be matched with the other's.

    In a group of two, both ranks count every send and receive between them in one counter
    (``p2p_seq_id``), so op #k of one is op #k of the other: ops are numbered by it, and
    ``posted`` and ``completed`` are the group's counts. In a larger group the counter runs
    over several peers and matches nothing on the other end: only the ops still pending are
    numbered, from 1 on each channel, which both ends' dumps hold whole. An op is reported
    blocked only where it is the work the rank is held up in."""
    channels = []
    pair = len(ranks) == 2
    ops_of = _by_channel(entries, ranks)
    seqs = [number(e, "p2p_seq_id") for ops in ops_of.values() for e, _ in ops]
    done_seqs = [number(e, "p2p_seq_id") for ops in ops_of.values() for e, completed in ops if completed]
    pending_seqs = [number(e, "p2p_seq_id") for ops in ops_of.values() for e, completed in ops if not completed]
    last_done = (min(pending_seqs) - 1 if pending_seqs else max(done_seqs, default=0)) if pair else 0
    for (peer, direction), ops in sorted(ops_of.items()):
        waiting = [e for e, completed in ops if not completed]
        first = waiting[0] if waiting else None
        if pair:
            blocked = number(first, "p2p_seq_id") if first is not None else None
            posted, completed_count = max(seqs, default=0), last_done
        else:
            blocked = 1 if first is not None else None
            posted, completed_count = len(waiting), 0
        since = created_at(first) or None if first is not None else None
        mine = held is not None and first is held
        channels.append(
            P2P(
                group=name,
                peer=peer,
                dir=SEND if direction == "send" else RECV,
                posted=posted,
                completed=completed_count,
                pending=blocked,
                since=since,
                blocked=blocked if mine else None,
                blocked_since=since if mine else None,
            )
        )
    return channels


ROOTED = ("broadcast", "reduce", "gather", "scatter")
"""Collectives with a root (rank 0 as a rule), which may complete on the root before the others."""
_FAMILIES = (
    ("all_reduce", "all_reduce"),
    ("barrier", "all_reduce"),  # NCCL runs a barrier as an all-reduce: its watchdog says ALLREDUCE
    ("monitored_barrier", "all_reduce"),
    ("all_gather", "all_gather"),
    ("reduce_scatter", "reduce_scatter"),
    ("all_to_all", "all_to_all"),
    ("broadcast", "broadcast"),
    ("gather", "gather"),
    ("scatter", "scatter"),
    ("reduce", "reduce"),
    ("isend", "send"),
    ("send", "send"),
    ("irecv", "recv"),
    ("recv", "recv"),
)


def op_family(name: str) -> str | None:
    """The collective an op is one of, whether the watchdog, the Flight Recorder or a
    ``torch.distributed`` function names it (``_ALLGATHER_BASE``, ``all_gather_into_tensor``
    and ``all_gather_object`` are all an all-gather); None for any other name."""
    bare = name.lower().lstrip("_").replace("allgather", "all_gather").replace("allreduce", "all_reduce")
    bare = bare.replace("reducescatter", "reduce_scatter").replace("alltoall", "all_to_all")
    return next((family for prefix, family in _FAMILIES if bare.startswith(prefix)), None)
