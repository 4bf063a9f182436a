"""PyTorch's Flight Recorder dumps, read: the one reader of the live hook and of ``distmon analyze``.

A dump (pickle or JSON, torch 2.5 on) is a dict: ``pg_config`` keyed by group *name`` (with
the group's global ``ranks``), ``pg_status`` keyed by the group's *local* id on this rank
(``pg_id``: the same id names different groups on different ranks), and ``entries``, the
ring of recent work, oldest first, each carrying both ``pg_id`` and ``process_group =
(name, desc)``. So ids are named through the entries.

``pg_status`` counts from the sequence number of the group's last work, which for a
point-to-point op is the p2p counter (NCCL) or a counter of both (gloo): collectives are
counted from the entries' ``collective_seq_id`` instead.

A dump written by another machine is data, never code: pickles are read by an unpickler that
refuses every class, sizes are bounded, and every field is read by type (a nested structure
where a string belongs is taken as absent, never printed).
"""

from __future__ import annotations

import functools
import io
import json
import pickle
import re
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from distmon.wire import P2P, RECV, SEND, GroupStatus, rank_runs

MAX_DUMP_FILE_BYTES = 256 * 1024 * 1024
"""A dump file (or bytes) larger than this is refused unread: 2000 entries with stack traces are
a few MB. (A dump a rank sends the monitor is bounded by the wire, :data:`distmon.channel.MAX_DUMP_MESSAGE_BYTES`.)"""
MAX_ENTRIES = 1_000_000
"""Entries a dump may hold (torch's default ring is 2000)."""
MAX_NAME = 1024
"""The longest name (group, op, description) read; longer ones are taken as absent."""
MAX_GROUP_RANKS = 1 << 20
"""Members a group's ``ranks`` may list."""
MAX_DEPTH = 100
"""Levels of nesting a dump may have: torch's is six deep (the dump, entries, an entry, its
frames, a frame, a value); far deeper is built to crash whatever walks or hashes it."""
MAX_VALUES = 16_000_000
"""Values (each string, number, list, dict) a dump may hold: 2000 entries with stack traces
hold well under a million; more would take gigabytes to build."""
MAX_OPCODES = 2 * MAX_VALUES
"""Pickle instructions a dump may hold, those that build nothing included."""
MAX_SECONDS = 30.0
"""Seconds one dump may take to be checked: a dump that has not been read by then is refused."""
_CHECK_EVERY = 1 << 16
"""Instructions between two looks at the clock."""

LATEST = 64
"""Entries, from the newest, in which the dump's latest moment is looked for."""

InFlight = tuple[int, float]
"""(ops not completed, when the oldest was enqueued)."""
_P2P_NAME = re.compile(r":(send|recv) (\d+)(?:->|<-)(\d+)")
_RANKS = re.compile(r"-?\d+")
_HUGE = 1 << 62
_INTEGER = re.compile(r"-?\d{1,18}")
Entry = dict[str, Any]


class DumpError(ValueError):
    """Not a Flight Recorder dump this reader will read; the message says why, in a few words."""


class _NoClasses(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise DumpError(f"holds a Python object ({module[:60]}.{name[:60]}), refused: a dump holds plain data only")


# The pickle instructions a dump's scan knows (see pickletools for each), by what they do.
_STR1, _STR4, _STR8, _BYTES1, _BYTES4, _BYTES8, _LONG1, _LONG4 = range(1, 9)
_SMALL0, _SMALL1, _SMALL2, _SMALL4, _FLOAT8, _LINE = range(9, 15)
_GET1, _GET4, _PUT1, _PUT4, _MEMOIZE, _MARK, _EMPTY = range(15, 22)
_SETITEMS, _APPENDS, _SETITEM, _APPEND, _TUPLE_N, _FROM_MARK = range(22, 28)
_SKIP1, _SKIP8, _STOP, _POP, _POP_MARK, _DUP, _OBJECT, _GLOBAL = range(28, 36)
_KIND = [0] * 256
for _ops, _kind in [
    ("\x8c", _STR1), ("X", _STR4), ("\x8d", _STR8), ("UC", _BYTES1), ("TB", _BYTES4), ("\x8e\x96", _BYTES8),
    ("\x8a", _LONG1), ("\x8b", _LONG4), ("N\x88\x89", _SMALL0), ("K", _SMALL1), ("M", _SMALL2), ("J", _SMALL4),
    ("G", _FLOAT8), ("ILFSVgp", _LINE), ("h", _GET1), ("j", _GET4), ("q", _PUT1), ("r", _PUT4),
    ("\x94", _MEMOIZE), ("(", _MARK), ("}])", _EMPTY), ("u", _SETITEMS), ("e", _APPENDS), ("s", _SETITEM),
    ("a", _APPEND), ("\x85\x86\x87", _TUPLE_N), ("tld", _FROM_MARK), ("\x80", _SKIP1), ("\x95", _SKIP8),
    (".", _STOP), ("0", _POP), ("1", _POP_MARK), ("2", _DUP),
    ("c\x93", _GLOBAL), ("iobR\x81\x92PQ\x82\x83\x84\x97\x98\x8f\x90\x91", _OBJECT),
]:  # fmt: skip
    for _op in _ops:
        _KIND[ord(_op)] = _kind
_KEY, _SCALAR, _CONTAINER = 1, 2, 4
"""A value as the scan sees it: ``depth << 3 | kind``. A key must be exactly ``_KEY``: a
string (hashed with a per-process secret) or an int under 2**55 (ints hash modulo
2**61 - 1, so only larger ones can be made to share a hash, and many keys of one hash make
building a dict quadratic)."""
_EMPTY_CONTAINER = 1 << 3 | _CONTAINER
_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_NOT_NAMES = "a mapping keyed by other than names and small numbers: not a dump"


def _bad_keys(items: list[int]) -> bool:
    return len(items) % 2 == 1 or items[::2].count(_KEY) * 2 != len(items)


def _holding(container: int, items: list[int]) -> int:
    """``container`` (a code) after ``items`` were put in it; raises past :data:`MAX_DEPTH`."""
    if not container & _CONTAINER:
        raise DumpError("puts items in a value that is no list or dict: not a dump")
    if not items:
        return container
    depth = (max(items) >> 3) + 1
    if depth > MAX_DEPTH:
        raise DumpError(f"nested deeper than {MAX_DEPTH} levels: not a dump")
    return max(container, depth << 3 | _CONTAINER)


def _refuse_if_past_bounds(count: int, values: int, started: float, at: int, size: int) -> None:
    """The walk's bounds, looked at once every :data:`_CHECK_EVERY` instructions so that its hot
    loop reads the clock only that often."""
    if count > MAX_OPCODES or values > MAX_VALUES:
        raise DumpError(f"holds over {MAX_VALUES} values, more than a dump")
    if time.monotonic() - started > MAX_SECONDS:
        raise DumpError(f"not read within {MAX_SECONDS:.0f} s (at byte {at} of {size})")


def _fill(kind: int, raw: bytes, at: int, stack: list[int], marks: list[int]) -> None:
    """A list, dict or tuple given its items: where a dict's keys are checked (names and small
    numbers only, so none can share a hash) and its depth is bounded (:func:`_holding`)."""
    if kind in (_SETITEMS, _APPENDS):
        start = marks.pop()
        items = stack[start:]
        del stack[start:]
        if kind == _SETITEMS and _bad_keys(items):
            raise DumpError(_NOT_NAMES)
        stack[-1] = _holding(stack[-1], items)
    elif kind in (_SETITEM, _APPEND):
        n = 2 if kind == _SETITEM else 1
        items = stack[-n:]
        if len(stack) <= n or (kind == _SETITEM and _bad_keys(items)):
            raise DumpError(_NOT_NAMES)
        del stack[-n:]
        stack[-1] = _holding(stack[-1], items)
    else:  # a tuple of 1 to 3, or a tuple, list or dict of the items since the mark
        if kind == _TUPLE_N:
            start = len(stack) - (raw[at - 1] - 0x84)
            if start < 0:
                raise IndexError
        else:
            start = marks.pop()
        items = stack[start:]
        del stack[start:]
        if raw[at - 1] == 0x64 and _bad_keys(items):  # DICT
            raise DumpError(_NOT_NAMES)
        stack.append(_holding(_EMPTY_CONTAINER, items))


def _protocol0_line(op: int, line: bytes, stack: list[int], memo: dict[int, int]) -> int:
    """Protocol 0's instructions, a value, GET or PUT written out on a line of its own, apart
    from the walk's loop because torch never writes them. Returns the values pushed (0 or 1)."""
    if op == 0x67:
        stack.append(memo[int(line)])
    elif op == 0x70:
        memo[int(line)] = stack[-1]
        return 0
    else:
        stack.append(_KEY if op == 0x49 and len(line) < 16 else _SCALAR)
    return 1


def _rare(kind: int, raw: bytes, at: int, stack: list[int], marks: list[int]) -> int:
    """The instructions a dump seldom or never holds, apart from the walk's loop so that its
    chain of tests stays short for the common ones; refuses objects and unknown instructions.
    Returns where the walk goes on."""
    if kind in (_SKIP1, _SKIP8):
        return at + (1 if kind == _SKIP1 else 8)
    if kind == _POP:
        if marks and marks[-1] == len(stack):
            marks.pop()
        else:
            stack.pop()
    elif kind == _POP_MARK:
        del stack[marks.pop() :]
    elif kind == _DUP:
        stack.append(stack[-1])
    elif kind == _OBJECT:
        raise DumpError("holds a Python object or a set, refused: a dump holds plain data only")
    else:
        raise DumpError(f"not a dump (pickle instruction {raw[at - 1]:#04x} at byte {at - 1})")
    return at


def _walk(raw: bytes, stack: list[int], marks: list[int]) -> int | None:
    """:func:`scan_pickle`'s loop, the common instructions first and inline (a call each would
    cost more than the instruction). Returns the byte after STOP, or None at a class's name (the
    unpickler refuses it by name, :class:`_NoClasses`, having built only what came before)."""
    memo: dict[int, int] = {}
    size, at, count, values, check = len(raw), 0, 0, 0, _CHECK_EVERY
    started, kinds, push = time.monotonic(), _KIND, stack.append
    try:
        while True:
            kind = kinds[raw[at]]
            at += 1
            count += 1
            if count >= check:
                check += _CHECK_EVERY
                _refuse_if_past_bounds(count, values, started, at, size)
            if kind == _GET1:
                push(memo[raw[at]])
                at += 1
                values += 1
            elif kind == _PUT4:
                memo[_U32(raw, at)[0]] = stack[-1]
                at += 4
            elif kind == _PUT1:
                memo[raw[at]] = stack[-1]
                at += 1
            elif kind <= _BYTES8:  # strings and bytes, by the width of their length
                if kind in (_STR1, _BYTES1):
                    at += 1 + raw[at]
                elif kind in (_STR4, _BYTES4):
                    at += 4 + _U32(raw, at)[0]
                else:
                    at += 8 + _U64(raw, at)[0]
                push(_KEY if kind <= _STR8 else _SCALAR)
                values += 1
            elif kind <= _SMALL4:  # numbers, None, True, False
                if kind == _LONG1:
                    push(_KEY if raw[at] < 8 else _SCALAR)
                    at += 1 + raw[at]
                elif kind == _LONG4:
                    push(_SCALAR)
                    at += 4 + _U32(raw, at)[0]
                else:
                    push(_KEY)
                    at += (0, 1, 2, 4)[kind - _SMALL0]
                values += 1
            elif kind == _MARK:
                marks.append(len(stack))
            elif kind == _EMPTY:
                push(_EMPTY_CONTAINER)
                values += 1
            elif _SETITEMS <= kind <= _FROM_MARK:
                _fill(kind, raw, at, stack, marks)
            elif kind == _GET4:
                push(memo[_U32(raw, at)[0]])
                at += 4
                values += 1
            elif kind == _MEMOIZE:
                memo[len(memo)] = stack[-1]
            elif kind == _FLOAT8:
                push(_SCALAR)
                at += 8
                values += 1
            elif kind == _LINE:  # protocol 0: a whole line, passed before it is read
                op, end = raw[at - 1], raw.index(b"\n", at)
                line, at = raw[at:end], end + 1
                values += _protocol0_line(op, line, stack, memo)
            elif kind == _STOP:
                return at
            elif kind == _GLOBAL:
                return None
            else:
                at = _rare(kind, raw, at, stack, marks)
    except DumpError:
        raise
    except (IndexError, KeyError, ValueError, struct.error):
        if at >= size:
            raise DumpError(f"unreadable: truncated at byte {size}, not a whole dump") from None
        raise DumpError(f"unreadable at byte {at}: truncated or not a dump") from None


def scan_pickle(raw: bytes) -> None:
    """Walk a pickle's instructions, building nothing, and refuse it before the unpickler
    builds what it describes: a Python object, nesting beyond :data:`MAX_DEPTH` (hashing a
    tuple a million deep overflows the C stack), keys that may share a hash, more than
    :data:`MAX_VALUES` values, or a walk longer than :data:`MAX_SECONDS`."""
    stack: list[int] = []
    marks: list[int] = []
    at = _walk(raw, stack, marks)
    if at is None:
        return
    if at > len(raw):
        raise DumpError(f"unreadable: truncated at byte {len(raw)}, not a whole dump")
    if len(stack) != 1 or marks:
        raise DumpError("unreadable: its pickle leaves no single value, not a dump")


def load(raw: bytes, walk_first: bool = True) -> dict[str, Any]:
    """A dump's dict, from torch's pickle or JSON bytes; raises :class:`DumpError`. A pickle
    is walked by :func:`scan_pickle` before anything is built; JSON is bounded in values
    before it is parsed (its keys are strings, and the parser stops at Python's recursion
    limit). Not walked (``walk_first=False``, sparing a loop in Python over every instruction
    before the unpickler's in C): a dump this process wrote itself, or one read in a process
    that may die of it (:mod:`distmon.forensics.parallel`)."""
    if len(raw) > MAX_DUMP_FILE_BYTES:
        raise DumpError(f"{len(raw) >> 20} MiB, over the {MAX_DUMP_FILE_BYTES >> 20} MiB a dump may have")
    try:
        if raw[:1] == b"\x80":
            if walk_first:
                scan_pickle(raw)
            # read through a buffer that holds it whole: the unpickler then takes its bytes as
            # pickle.loads does, not a few at a time (a call into the buffer each)
            dump = _NoClasses(io.BufferedReader(io.BytesIO(raw), buffer_size=len(raw) + 1)).load()
        elif raw.lstrip()[:1] == b"{":
            if raw.count(b",") + raw.count(b"[") + raw.count(b"{") > MAX_VALUES:
                raise DumpError(f"holds over {MAX_VALUES} values, more than a dump")
            dump = json.loads(raw)
        else:
            raise DumpError("not a Flight Recorder dump (neither its pickle nor its JSON)")
    except DumpError:
        raise
    except RecursionError:
        raise DumpError("nested too deep to be a dump") from None
    except Exception as e:  # the unpickler raises what the bytes make it raise: any of them means unreadable
        why = " ".join(str(e).split())[:80]
        raise DumpError(f"unreadable ({type(e).__name__}: {why}), truncated or not a dump") from None
    if not isinstance(dump, dict) or not ({"entries", "pg_status", "version"} & dump.keys()):
        raise DumpError("not a Flight Recorder dump (no entries, pg_status or version)")
    entries = dump.get("entries", [])
    if not isinstance(entries, list):
        raise DumpError("its entries are not a list")
    if len(entries) > MAX_ENTRIES:
        raise DumpError(f"holds {len(entries)} entries, over the {MAX_ENTRIES} a dump may have")
    dump["entries"] = [e for e in entries if isinstance(e, dict)]
    for part in ("pg_status", "pg_config"):
        if not isinstance(dump.get(part, {}), dict):
            raise DumpError(f"its {part} is not a mapping")
    return dump


def text(entry: Any, key: str) -> str | None:
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


def group_name(entry: Entry) -> str:
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
        pg_id, name = e.get("pg_id"), group_name(e)
        if isinstance(pg_id, int | str) and name:
            names.setdefault(str(pg_id), name)
    return names


def op_name(entry: Entry) -> str | None:
    """``nccl:all_reduce`` -> ``all_reduce``."""
    name = text(entry, "profiling_name")
    return name.split(":")[-1] or None if name else None


def enqueued(status: Any) -> int:
    return number(status, "last_enqueued_collective")


def started(status: Any) -> int | None:
    """``last_started_collective``: -1 unless the backend times collectives (NCCL with
    ``TORCH_NCCL_ENABLE_TIMING``), so absent then."""
    value = number(status, "last_started_collective", -1)
    return value if value >= 0 else None


def p2p_batch(entry: Entry) -> bool:
    """NCCL's record of a batch of point-to-point ops (``nccl:coalesced``, no sizes)."""
    name = text(entry, "profiling_name") or ""
    return name.endswith(":coalesced") and not entry.get("input_sizes")


def done(entry: Entry) -> bool:
    """Completed: retired by the watchdog, or its completion seen."""
    return (
        bool(entry.get("retired"))
        or text(entry, "state") == "completed"
        or number(entry, "time_discovered_completed_ns") > 0
    )


def collectives_of(entries: list[Entry], name: str) -> dict[int, Entry]:
    """The group's collectives in a dump, by sequence number: not its point-to-point ops, nor
    NCCL's record of a batch of them (``nccl:coalesced`` with no sizes, which carries the
    number of the collective before it)."""
    return {
        number(e, "collective_seq_id"): e
        for e in entries
        if group_name(e) == name and not e.get("is_p2p") and not p2p_batch(e)
    }


P2POp = tuple[Entry, bool]
"""A point-to-point op's entry, and whether it completed."""


def p2p_ops(entries: list[Entry], name: str, ranks: list[int]) -> dict[tuple[int, str], list[P2POp]]:
    """Group ``name``'s point-to-point ops per channel (the peer's global rank, ``send`` or
    ``recv``), in the order posted, each with whether it completed: an op of a
    ``batch_isend_irecv`` is never retired itself (it has no CUDA events of its own), the
    batch's ``nccl:coalesced`` entry, which shares its ``p2p_seq_id``, says for them all.

    An op is named ``nccl:send 0->1`` or ``nccl:recv 0<-1`` in ranks of the group."""
    return _by_channel([e for e in entries if group_name(e) == name], ranks)


def _by_channel(mine: list[Entry], ranks: list[int]) -> dict[tuple[int, str], list[P2POp]]:
    """:func:`p2p_ops` of one group's entries."""
    batches = {number(e, "p2p_seq_id"): e for e in mine if p2p_batch(e)}
    out: dict[tuple[int, str], list[P2POp]] = {}
    for e in mine:
        parsed = _p2p_name(text(e, "profiling_name") or "") if e.get("is_p2p") else None
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
    """When the entry was enqueued, in unix seconds (0 when unknown)."""
    return number(entry, "time_created_ns") / 1e9


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
    out = RankDump(version=text(dump, "version"))
    by_group: dict[str, list[Entry]] = {}
    named: dict[str, str] = {}
    pending: list[Entry] = []
    for e in entries:  # one pass: a dump of 8192 ranks holds 16 million entries
        name = group_name(e)
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
        (e for e in reversed(entries) if number(e, "time_discovered_started_ns") > 0 or text(e, "state") == "started"),
        None,
    )
    names = pg_names(dump, named)
    out.unnamed = sorted(str(k)[:MAX_NAME] for k, v in status.items() if str(k) not in names and enqueued(v) > 0)
    times = [t for e in entries[-LATEST:] for t in _times(e)]
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
        desc = text(config, "desc") if isinstance(config, dict) else None
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
    backend, colon, _ = (text(last, "profiling_name") or "").partition(":")
    timeout = number(last, "timeout_ms", -1)
    group = GroupStatus(
        id=name,
        backend=backend if colon and backend else "unknown",
        size=max(1, len(ranks)),
        ranks=rank_runs(ranks),
        timeout=timeout / 1000 if timeout >= 0 else None,
        enqueued=issued,
        completed=max(0, completed),
        started=started(status),
        desc=group_desc(last) or desc,
    )
    if pending:
        first = seqs[pending[0]]
        inner = [e for e in first if not (text(e, "profiling_name") or "").endswith(":coalesced")]
        group.op = op_name((inner or first)[0])
        if held is not None and any(e is held for e in first):
            group.since = created_at(first[0]) or None
    return group


def _completed(ops: list[Entry]) -> bool:
    batch = [e for e in ops if (text(e, "profiling_name") or "").endswith(":coalesced")]
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
