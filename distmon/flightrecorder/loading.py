"""A dump's bytes into plain data, safely: a pickle is walked first, building nothing, and
refused for a class, nesting, keys that may share a hash, or sizes beyond the bounds below;
then an unpickler that refuses every class builds it. JSON is bounded in values before it is
parsed. What the data says is :mod:`distmon.flightrecorder.fields`' to read.
"""

from __future__ import annotations

import io
import json
import pickle
import struct
import time
from typing import Any

MAX_DUMP_FILE_BYTES = 256 * 1024 * 1024
"""A dump file (or bytes) larger than this is refused unread: 2000 entries with stack traces are
a few MB. (A dump a rank sends the monitor is bounded by the wire,
:data:`distmon.wire.sockets.MAX_DUMP_MESSAGE_BYTES`.)"""
MAX_ENTRIES = 1_000_000
"""Entries a dump may hold (torch's default ring is 2000)."""
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


def load_dump(raw: bytes, walk_first: bool = True) -> dict[str, Any]:
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
    if isinstance(dump, list) and all(isinstance(e, dict) and "seq_id" in e for e in dump):  # [] too: no work yet
        dump = {"entries": _as_torch_2_3(dump)}
    if not isinstance(dump, dict) or not ({"entries", "pg_status", "version"} & dump.keys()):
        raise DumpError("not a Flight Recorder dump (no entries, pg_status or version)")
    entries = dump.get("entries", [])
    if not isinstance(entries, list):
        raise DumpError("its entries are not a list")
    if len(entries) > MAX_ENTRIES:
        raise DumpError(f"holds {len(entries)} entries, over the {MAX_ENTRIES} a dump may have")
    dump["entries"] = [e for e in entries if isinstance(e, dict)]
    _as_since_torch_2_4(dump["entries"])
    for part in ("pg_status", "pg_config"):
        if not isinstance(dump.get(part, {}), dict):
            raise DumpError(f"its {part} is not a mapping")
    return dump


def _as_torch_2_3(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Torch 2.2's dump is its entries alone, a list: no version, no groups, no status, the times in
    microseconds (``time_created_us``), each entry's group by its id on this rank alone (``pg_id``). Each
    entry as torch 2.3 wrote it: id 0 is the default group (a rank's first), named as torch names it; the
    other ids count the groups this rank is a member of, so they name no group across ranks and stay
    unnamed (read on this rank alone)."""
    for e in entries:
        if type(e.get("time_created_us")) is int:
            e["time_created_ns"] = e["time_created_us"] * 1000
        if e.get("pg_id") == 0:
            e["process_group"] = ("0", "default_pg")
    return entries


def _as_since_torch_2_4(entries: list[dict[str, Any]]) -> None:
    """Torch 2.3's dumps (version 1.x) number a group's work in one ``seq_id``, collectives and
    sends and receives together, and mark no entry point-to-point: each such entry gets the
    fields torch wrote since (a send or receive known by its name gets its number as its p2p
    number, and the group's collective number before it), so every reader reads one shape."""
    last: dict[int | str | None, Any] = {}
    for e in entries:
        if "collective_seq_id" in e or "seq_id" not in e:
            continue
        name, group = e.get("profiling_name"), e.get("pg_id")
        key = group if type(group) in (int, str) else None
        e["is_p2p"] = isinstance(name, str) and name.startswith(("nccl:send", "nccl:recv"))
        if e["is_p2p"]:
            e["p2p_seq_id"], e["collective_seq_id"] = e["seq_id"], last.get(key, 0)
        else:
            e["collective_seq_id"] = last[key] = e["seq_id"]
