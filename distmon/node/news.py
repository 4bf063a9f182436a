"""Which of its ranks' reports a relay sends up whole, beside their columns.

A rank reports its whole state every interval; most of it, between two reports, is the same
(its groups and their members, its host, its DataLoader workers) or is in the frame's header
and rows, which always go (steps, collective sequence numbers, memory). So a report goes
whole only when it may say something the columns do not:

- **what its header and rows name changed**: another process, a flag (stalled, raised,
  exited, a DataLoader worker dead, a GPU fault), another stack, another set of groups or
  channels, another op in flight (:func:`signatures`);
- **the monitor asked** for the rank within :data:`WATCH` seconds (a ``details`` command: the
  ranks it is looking at, for an alert's evidence or a screen's rows), so what it reads of
  them is at most an interval old;
- **now and then**: at least every :data:`REFRESH` seconds (spread over the ranks), so that
  a monitor started late, or a batch lost on the way, costs at most that long, and what
  changes only inside the report (CPU and bytes used, GPU utilization) is never older.

The relay's memory for this is three numbers a rank, for ranks below :data:`MAX_RANK`; the
report of a rank beyond it (which the monitor refuses anyway) always goes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from distmon.wire.arrays import Ints, Parsed

REFRESH = 30.0
"""Seconds between two whole reports of a rank, at most (on average three quarters of it)."""
WATCH = 5.0
"""Seconds a monitor's request for a rank's whole reports lasts: it asks again each second
while it still looks."""
MAX_RANK = 262_144
"""Ranks a relay keeps track of (the monitor's own ``MAX_WORLD``)."""

U8 = npt.NDArray[np.uint64]


def _mix(x: npt.NDArray[Any]) -> U8:
    """splitmix64's finalizer over an array: every input bit moves every output bit."""
    y = x.astype(np.uint64)
    y ^= y >> np.uint64(30)
    y *= np.uint64(0xBF58476D1CE4E5B9)
    y ^= y >> np.uint64(27)
    y *= np.uint64(0x94D049BB133111EB)
    y ^= y >> np.uint64(31)
    return y


def _per_frame(row_hash: U8, counts: Ints) -> U8:
    """The sum (modulo 2**64) of each frame's row hashes, the rows frame after frame."""
    total = np.concatenate([np.zeros(1, dtype=np.uint64), np.cumsum(row_hash, dtype=np.uint64)])
    ends = np.cumsum(counts)
    per: U8 = total[ends] - total[ends - counts]
    return per


def signatures(parsed: Parsed) -> U8:
    """Per frame: a hash of what its header and rows name, of which any change means its report
    has news (never 0)."""
    h = parsed.headers
    x = np.zeros(len(h), dtype=np.uint64)
    for name in ("job", "host", "pid", "world", "flags", "stack", "groups", "channels"):
        x = _mix(x ^ h[name].astype(np.uint64))
    g, c = parsed.groups, parsed.channels
    group_rows = _mix(g["id"] ^ _mix(g["op"] ^ parsed.group_slot.astype(np.uint64)))
    key = c["peer"].astype(np.int64).astype(np.uint64) ^ (c["dir"].astype(np.uint64) << np.uint64(32))
    channel_rows = _mix(c["group"] ^ _mix(key ^ (parsed.channel_slot.astype(np.uint64) << np.uint64(40))))
    x ^= _per_frame(group_rows, h["groups"].astype(np.int64))
    x = _mix(x ^ _per_frame(channel_rows, h["channels"].astype(np.int64)))
    signed: U8 = x | np.uint64(1)
    return signed


class News:
    """A relay's memory of what it sent of each rank: the signature of its latest frame, when
    its whole report is due again, until when the monitor watches it."""

    def __init__(self, refresh: float = REFRESH, seed: int | None = None) -> None:
        self.refresh = refresh
        self._signature = np.zeros(0, dtype=np.uint64)
        self._due = np.zeros(0, dtype=np.float64)
        self._watched = np.zeros(0, dtype=np.float64)
        self._random = np.random.default_rng(seed)

    def _reserve(self, ranks: int) -> None:
        if ranks > len(self._signature):
            grown = min(MAX_RANK, max(ranks, 2 * len(self._signature), 64))
            self._signature = np.concatenate([self._signature, np.zeros(grown - len(self._signature), np.uint64)])
            self._due = np.concatenate([self._due, np.zeros(grown - len(self._due))])
            self._watched = np.concatenate([self._watched, np.zeros(grown - len(self._watched))])

    def choose(self, parsed: Parsed, now: float) -> npt.NDArray[np.bool_]:
        """Per frame of ``parsed`` (in the order they came): whether its report goes whole;
        remembers the choice."""
        rank = parsed.headers["rank"].astype(np.int64)
        tracked = (rank >= 0) & (rank < MAX_RANK)
        mine = np.where(tracked, rank, 0)
        self._reserve(int(mine.max(initial=-1)) + 1)
        signature = signatures(parsed)
        order = np.argsort(mine, kind="stable")
        later = np.zeros(len(rank), dtype=bool)
        later[order[1:]] = mine[order[1:]] == mine[order[:-1]]
        before = self._signature[mine]
        before[order[1:]] = np.where(later[order[1:]], signature[order[:-1]], before[order[1:]])
        due = ~later & (self._due[mine] <= now)  # a rank's refresh is its first frame's
        send: npt.NDArray[np.bool_] = ~tracked | (signature != before) | due | (self._watched[mine] > now)
        last = order[np.r_[mine[order][1:] != mine[order][:-1], True]] if len(order) else order
        last = last[tracked[last]]
        self._signature[mine[last]] = signature[last]
        went = mine[send & tracked]
        self._due[went] = now + self.refresh * (0.5 + 0.5 * self._random.random(len(went)))
        return send

    def unsent(self, ranks: Ints) -> None:
        """The whole reports of ``ranks`` did not go (their batch was dropped): send the next."""
        ranks = ranks[(ranks >= 0) & (ranks < len(self._signature))]
        self._signature[ranks] = 0
        self._due[ranks] = 0.0

    def watch(self, ranks: list[int], now: float) -> None:
        """The monitor asks for the whole reports of ``ranks`` for the next :data:`WATCH` seconds."""
        wanted = np.array([r for r in ranks if 0 <= r < MAX_RANK], dtype=np.int64)
        self._reserve(int(wanted.max(initial=-1)) + 1)
        self._watched[wanted] = now + WATCH
