"""What a live monitor tells the screens attached to it (``distmon watch --attach``), and what
they ask of it: the messages, both ways.

A screen shows the monitor's verdicts, never its own. It takes in the reports the monitor
admitted, each at the time the monitor received it, so that its state is the monitor's (the
same facts, read off the same reports at the same times); and it takes the monitor's alerts
as they change, with what the ranks they name do in the words of the rules that named them
(a screen on a laptop has neither the prober nor py-spy, and runs no detector).

A screen sends one message, :data:`HELLO`, when it attaches and whenever it finds it missed
something; the monitor answers with a catch-up, then streams on. Every message the monitor
sends is two frames: its number in that screen's stream (:func:`numbered`), and one record in
msgpack, an array whose first element says what it is:

- ``["b", t, ...]``, ``["n", t, ...]`` and ``["a", t, ...]``: the recording's own batch,
  relay's columns and alert records (:mod:`distmon.monitor.recording.format`), as the monitor
  records them;
- ``["c", t, meta]``: a catch-up at the monitor's tick ``t``. ``meta`` is ``{"max_world": N,
  "history": [[key, alert, resolved], ...], "active": [index, ...], "progress": [samples,
  marker, last]}``: every alert raised so far (``alert`` as ``distmon report --json`` shows
  it, ``resolved`` a time or nil), the indices of those standing, and the job's progress as
  the monitor followed it (:class:`Progress`). The job's state follows in:
- ``["s", t, offsets, relays, via, payload, times]``: ranks' latest reports, as a batch
  record holds them, report ``i`` received at ``times[i]`` (float64, little-endian);
- ``["t", t, dropped, doing, pausing]``: the monitor ticked at ``t``: what it refused so far,
  by reason, with the seconds it did not watch under their own reasons, as a recording's ``d``
  record holds both (:mod:`distmon.monitor.state.unwatched`); what the ranks its first cause
  names do, ``[[key, [[rank, words], ...]], ...]`` (:attr:`distmon.monitor.state.alerts.Alert.doing`,
  which the alert records leave out: it is no change of the alert's); and the ranks in a pause
  the job takes as a habit, ``[[rank, words], ...]`` (:mod:`distmon.monitor.rules.routine`),
  which its detector alone learns.

A screen reads these as it reads a file from another machine: within the recording's limits,
and a message that is not one of them is dropped and counted (:class:`AttachError`).
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np

from distmon.guards.text import visible
from distmon.monitor.recording.batches import PIECE_BYTES
from distmon.monitor.recording.format import (
    DAMAGED,
    AlertEvent,
    BatchRecord,
    ColumnRecord,
    alert_record,
    is_time,
    parse_record,
)
from distmon.monitor.recording.reader import READ_LIMITS
from distmon.monitor.state.alerts import Alert, Change
from distmon.monitor.state.columns import F8, I8
from distmon.monitor.state.statuses import MAX_SAID
from distmon.monitor.state.unwatched import apart
from distmon.wire import WireError
from distmon.wire.sockets import Batch, Relay, assemble_batch

HELLO = b"distmon-view/2"
"""A screen's one message: send me the job as it stands, then everything after. Version 1's
ticks carried the prober's verdicts on the culprits' processes instead of their words."""
MAX_PAUSING = 1024
"""Ranks in a usual pause a tick carries at most."""
MAX_DOING = 16
"""Alerts whose ranks' words a tick carries at most (:data:`MAX_SAID` ranks each)."""
SEQUENCE = struct.Struct("<Q")


class AttachError(Exception):
    """A message from the monitor that is not one (a damaged or foreign one)."""


@dataclass(frozen=True)
class Progress:
    """The job's progress as a monitor followed it from tick to tick
    (:class:`distmon.monitor.overview.OverviewTracker`): its recent (time, furthest step)
    samples, its marker of progress, and when that last moved."""

    samples: tuple[tuple[float, int], ...] = ()
    marker: tuple[int, int] | None = None
    last: float | None = None


@dataclass
class CatchUp:
    """The monitor's alerts and progress at its tick ``t``; its ranks' reports follow."""

    t: float
    max_world: int
    history: list[Alert]
    active: list[Alert]
    progress: Progress


@dataclass
class Standing:
    """Ranks' latest reports, each with when the monitor received it."""

    t: float
    batch: Batch
    times: F8


@dataclass
class Tick:
    """The monitor ticked at ``t``: its refusals and the seconds it did not watch so far, what
    the ranks its alerts name do (by alert key), and the ranks in a usual pause."""

    t: float
    dropped: Counter[str]
    unwatched: Counter[str] = field(default_factory=Counter)
    doing: dict[str, dict[int, str]] = field(default_factory=dict)
    pausing: dict[int, str] = field(default_factory=dict)


Streamed = BatchRecord | ColumnRecord | AlertEvent | CatchUp | Standing | Tick


def numbered(n: int) -> bytes:
    """A message's number in a screen's stream: a gap tells the screen it missed some."""
    return SEQUENCE.pack(n)


def pack(record: list[Any]) -> bytes:
    return msgpack.packb(record, use_bin_type=True)


def alert_message(t: float, change: Change) -> bytes:
    """An alert's change, packed on the monitor's thread: the alert changes after."""
    return pack(alert_record(t, change))


def tick_message(
    t: float, dropped: Counter[str], unwatched: Counter[str], doing: dict[str, dict[int, str]], pausing: dict[int, str]
) -> bytes:
    said = [[key, [[rank, words] for rank, words in list(words.items())[:MAX_SAID]]] for key, words in doing.items()]
    paused = [[rank, words] for rank, words in list(pausing.items())[:MAX_PAUSING]]
    return pack(["t", t, dict(dropped + unwatched), said[:MAX_DOING], paused])


@dataclass
class JobAsItStands:
    """The job as it stands at the monitor's tick ``t``, taken on the monitor's thread (the
    reports are immutable bytes, the alerts already packed) and packed on another
    (:meth:`messages`)."""

    t: float
    max_world: int
    history: list[list[Any]]
    active: list[int]
    progress: Progress
    reports: Sequence[bytes | None]
    """By rank, as :meth:`distmon.monitor.state.job.JobState.raw_reports` gives them."""
    ranks: I8
    """The ranks heard from, in rank order; ``times`` and ``via`` run over them."""
    times: F8
    via: I8
    relays: list[Relay]

    def messages(self) -> Iterator[bytes]:
        """The catch-up record, then the reports in pieces of at most ``PIECE_BYTES``."""
        meta = {
            "max_world": self.max_world,
            "history": self.history,
            "active": self.active,
            "progress": [[list(s) for s in self.progress.samples], self.progress.marker, self.progress.last],
        }
        yield pack(["c", self.t, meta])
        relays = [[r.id, r.host] for r in self.relays]
        reports = [self.reports[r] or b"" for r in self.ranks.tolist()]
        ends = np.cumsum([len(r) for r in reports], dtype=np.int64)
        start = 0
        while start < len(reports):
            base = int(ends[start - 1]) if start else 0
            stop = max(start + 1, int(np.searchsorted(ends, base + PIECE_BYTES, side="right")))
            offsets = np.concatenate([[0], ends[start:stop] - base]).astype(np.uint32)
            via = self.via[start:stop].astype(np.int32)
            times = self.times[start:stop].astype("<f8")
            payload = b"".join(reports[start:stop])
            yield pack(["s", self.t, offsets.tobytes(), relays, via.tobytes(), payload, times.tobytes()])
            start = stop


def read(frames: Sequence[bytes]) -> tuple[int, Streamed | None]:
    """A message from the monitor: its number, and what it says (None for a record of a kind
    this screen does not know, skipped); raises :class:`AttachError` for one that is not a
    message of this protocol."""
    if len(frames) != 2 or len(frames[0]) != SEQUENCE.size:
        raise AttachError(f"{len(frames)} frames")
    (n,) = SEQUENCE.unpack(frames[0])
    try:
        item = msgpack.unpackb(
            frames[1],
            raw=False,
            max_bin_len=READ_LIMITS["max_bin_len"],
            max_str_len=READ_LIMITS["max_str_len"],
            max_array_len=READ_LIMITS["max_array_len"],
            max_map_len=READ_LIMITS["max_map_len"],
        )
    except (ValueError, msgpack.UnpackException) as e:
        raise AttachError(str(e) or type(e).__name__) from None
    if not isinstance(item, list) or not item or not is_time(item[1] if len(item) > 1 else None):
        raise AttachError("not a record")
    try:
        return n, _parse(item)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError, OverflowError, WireError) as e:
        raise AttachError(f"a damaged {item[0]!r} record: {e}") from None


def _parse(item: list[Any]) -> Streamed | None:
    kind, t = item[0], float(item[1])
    if kind in ("b", "n", "a"):
        record = parse_record(item)
        if record is DAMAGED or not isinstance(record, BatchRecord | ColumnRecord | AlertEvent):
            raise ValueError("malformed")
        return record
    if kind == "c":
        return _catch_up(t, item[2])
    if kind == "s":
        batch = assemble_batch(_bytes(item[5]), _bytes(item[2]), item[3], _bytes(item[4]))
        times = np.frombuffer(_bytes(item[6]), dtype="<f8").astype(np.float64)
        if len(times) != len(batch) or not all(is_time(x) for x in times.tolist()):
            raise ValueError("times do not fit the reports")
        return Standing(t, batch, times)
    if kind == "t":
        dropped, unwatched = apart({str(k): int(v) for k, v in item[2].items() if type(v) is int and 0 < v < 2**63})
        doing = {_text(key): _words(said, MAX_SAID) for key, said in item[3][:MAX_DOING]}
        return Tick(t, dropped, unwatched, doing, _words(item[4], MAX_PAUSING))
    return None


def _catch_up(t: float, meta: dict[str, Any]) -> CatchUp:
    history = []
    for key, alert, resolved in meta["history"]:
        record = parse_record(["a", 0.0, "raised", alert, key])  # the recording's checks of an alert
        if not isinstance(record, AlertEvent) or not (resolved is None or is_time(resolved)):
            raise ValueError("a malformed alert")
        record.alert.resolved = None if resolved is None else float(resolved)
        history.append(record.alert)
    active = [history[int(i)] for i in meta["active"]]
    samples, marker, last = meta["progress"]
    progress = Progress(
        tuple((float(s), int(n)) for s, n in samples),
        None if marker is None else (int(marker[0]), int(marker[1])),
        None if last is None else float(last),
    )
    max_world = int(meta["max_world"])
    if not 1 <= max_world < 2**31:
        raise ValueError(f"a world of {max_world} ranks")
    return CatchUp(t, max_world, history, active, progress)


def _words(pairs: Any, most: int) -> dict[int, str]:
    """``[[rank, words], ...]`` as the monitor sent them, the words made safe to show
    (:func:`distmon.guards.text.visible`)."""
    return {int(rank): visible(_text(words)) for rank, words in pairs[:most]}


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{type(value).__name__}, not text")
    return value


def _bytes(value: Any) -> bytes:
    if not isinstance(value, bytes):
        raise TypeError(f"{type(value).__name__}, not bytes")
    return value
