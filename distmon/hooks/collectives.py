"""Collective sequence numbers of every process group, from PyTorch's Flight Recorders.

Each backend records into a Flight Recorder of its own: gloo (and any CPU backend) into the
CPU recorder, NCCL into NCCL's. A status dump (no entries: small) gives, per group, the
last enqueued, started and completed sequence number; DDP's and FSDP's collectives, issued
from C++, are counted there too.

A status dump keys its groups by a process-local id (the order in which *this* process
created the groups of that backend), not by the group's name; only the entries of a full
dump carry both (``pg_id`` and ``process_group = (name, desc)``). So the reader learns the
id-to-name map from a full dump (the whole ring of entries) whenever a status dump shows an
id it cannot name, and keeps it: ids are never reused within a process. A full dump also
names the op and enqueue time of a collective that stays incomplete across two samples, once
per stuck collective.

The recorders are found by feature, never by torch version: a ``backend`` argument to
``_dump_fr_trace`` (newer torch: one call per backend in use), else ``_dump_fr_trace`` for
the CPU recorder and ``_dump_nccl_trace`` for NCCL's where the build has NCCL.
"""

from __future__ import annotations

import pickle
import sys
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from distmon.flightrecorder.fields import (
    InFlight,
    collectives_of,
    enqueued,
    entry_group,
    last_started,
    number,
    p2p_in_flight,
    pg_names,
)
from distmon.flightrecorder.loading import load_dump
from distmon.hooks.p2p import Channel, P2PTracker
from distmon.wire import ANY_SOURCE, P2P, GroupStatus, expand_runs, rank_runs

_c10d: Any
try:
    from torch._C import _distributed_c10d as _c10d
except ImportError:  # torch built without distributed
    _c10d = None

Dumper = Callable[[bool], bytes]
"""``dump(include_collectives) -> pickle``: one Flight Recorder, never with stack traces
(symbolizing them is slow and can need the GIL)."""

NO_DESCRIPTION = "undefined"
"""What torch calls a group created without ``group_desc``."""


@dataclass
class Recorder:
    """One Flight Recorder, and what this process has learnt of its group ids."""

    backend: str
    dump: Dumper
    names: dict[str, str] = field(default_factory=dict)
    """pg_id (as the status dump spells it) -> group name."""
    unnamed: dict[str, int] = field(default_factory=dict)
    """pg_id -> the enqueued count at which a full dump last failed to name it."""

    def status_by_name(self) -> dict[str, dict[str, Any]]:
        """The status dump's ``pg_status``, keyed by group name. An id it cannot name yet is
        looked up in a full dump, again only once that group has issued more collectives."""
        status: dict[str, dict[str, Any]] = load_dump(self.dump(False), walk_first=False).get("pg_status", {})
        todo = [
            pg_id
            for pg_id, entry in status.items()
            if pg_id not in self.names and self.unnamed.get(pg_id) != enqueued(entry)
        ]
        if todo:  # named by the entries, or by order where the ring no longer holds a group's work
            for pg_id, name in pg_names(load_dump(self.dump(True), walk_first=False)).items():
                self.names.setdefault(pg_id, name)
            for pg_id in todo:
                if pg_id not in self.names:
                    self.unnamed[pg_id] = enqueued(status[pg_id])
        return {self.names[pg_id]: entry for pg_id, entry in status.items() if pg_id in self.names}

    def status(self) -> dict[str, dict[str, Any]]:
        """The status dump's ``pg_status`` by pg_id, read the shortest way: the pace sampler
        reads it about 50 times a second, and these bytes are this process's own."""
        status: dict[str, dict[str, Any]] = pickle.loads(self.dump(False)).get("pg_status", {})
        return status

    def entries(self) -> list[dict[str, Any]]:
        """The collectives of a full dump (the whole ring: only when something is unknown)."""
        entries: list[dict[str, Any]] = load_dump(self.dump(True), walk_first=False).get("entries", [])
        return entries


def find_recorders(backends: set[str]) -> dict[str, Recorder]:
    """The Flight Recorders holding the collectives of ``backends`` (e.g. {"gloo", "nccl"}),
    keyed by backend. A backend with no recorder in this build is left out."""
    if _c10d is None or not hasattr(_c10d, "_dump_fr_trace"):
        return {}
    fr_trace = _c10d._dump_fr_trace
    if "backend" in _signature(fr_trace):
        return {b: Recorder(b, _per_backend(fr_trace, b)) for b in sorted(backends)}
    recorders: dict[str, Recorder] = {}
    cpu = Recorder("gloo", lambda collectives: fr_trace(includeCollectives=collectives, includeStackTraces=False))
    nccl_trace = getattr(_c10d, "_dump_nccl_trace", None)
    for backend in backends:
        if backend != "nccl":
            recorders[backend] = cpu
        elif nccl_trace is not None:
            recorders[backend] = Recorder(
                "nccl", lambda collectives: nccl_trace(includeCollectives=collectives, includeStackTraces=False)
            )
    return recorders


def _per_backend(fr_trace: Callable[..., bytes], backend: str) -> Dumper:
    return lambda collectives: fr_trace(includeCollectives=collectives, includeStackTraces=False, backend=backend)


def _signature(function: Callable[..., Any]) -> str:
    """A pybind11 function's signature: the first line of its docstring."""
    return (function.__doc__ or "").strip().split("\n", 1)[0]


@dataclass
class Membership:
    """A group this rank belongs to, as the reader reports it. The group is held weakly:
    torch keeps it while it exists, and a destroyed group is forgotten."""

    group: weakref.ref[Any]
    meta: dict[str, Any]
    backend: str
    name: str

    @property
    def pg(self) -> Any:
        return self.group()


class GroupReader:
    """Turns Flight Recorder dumps into :class:`GroupStatus` records, one per group, counting
    collectives only: ``p2p`` knows the point-to-point ops that share their groups."""

    def __init__(self, p2p: P2PTracker | None = None) -> None:
        self._p2p = p2p or P2PTracker()
        self._members: dict[str, list[Membership]] = {}
        self._recorders: dict[str, Recorder] = {}
        self._oldest: dict[str, tuple[int, float]] = {}
        """Group id -> (completed count, when first seen with the next one incomplete), while
        one is."""
        self._looked_up: dict[str, tuple[int, str | None, float | None]] = {}
        self._in_flight: dict[str, dict[tuple[int, str], InFlight]] = {}
        """Group id -> NCCL p2p ops in flight, read off a full dump while the group stands still."""
        self._standing: dict[str, tuple[int, int]] = {}
        self._retired: dict[str, int] = {}
        """Group id -> the last collective a full dump showed retired where the status lagged."""

    def read(self) -> list[GroupStatus]:
        if _c10d is None or not (dist.is_available() and dist.is_initialized()):
            return []
        memberships = self._memberships()
        self._p2p.before_status()
        statuses = {id(r): r.status_by_name() for r in self._distinct_recorders()}
        now = time.time()
        groups = []
        stuck: list[tuple[GroupStatus, Membership]] = []
        for m in memberships:
            recorder = self._recorders.get(m.backend)
            entry = statuses[id(recorder)].get(m.name, {}) if recorder else {}
            issued, completed = self._p2p.collectives(
                m.pg, enqueued(entry), max(0, int(entry.get("last_completed_collective", 0)))
            )
            group = GroupStatus(
                enqueued=issued,
                completed=max(completed, self._retired.get(m.meta["id"], 0)),
                started=last_started(entry),
                **m.meta,
            )
            if self._ages(group, now):
                stuck.append((group, m))
            if m.backend == "nccl" and self._p2p.carries(m.pg):
                self._p2p_standing(m, (enqueued(entry), int(entry.get("last_completed_collective", 0))))
            groups.append(group)
        if stuck:
            self._look_up_ops(stuck)
        return groups

    def waiting(self) -> bool | None:
        """Whether a collective is in flight in any of this process's groups, read off the
        status dumps alone (microseconds, safe from another thread): started and not completed
        where the backend times its collectives, issued and not completed otherwise. A group
        that carries sends and receives on NCCL, whose status counts them with its collectives,
        is left out: a pipeline's stages wait for each other by design. None before the process
        has a group."""
        recorders = self._distinct_recorders()
        if not recorders:
            return None
        for recorder in recorders:
            for pg_id, entry in recorder.status().items():
                begun = last_started(entry)
                last = enqueued(entry) if begun is None else begun
                if last > number(entry, "last_completed_collective") and not self._sends(recorder, pg_id):
                    return True
        return False

    def _sends(self, recorder: Recorder, pg_id: str) -> bool:
        """Whether the group ``pg_id`` of ``recorder`` counts sends and receives in its status."""
        members = self._members.get(recorder.names.get(pg_id, ""), [])
        return recorder.backend == "nccl" and any(self._p2p.carries(m.pg) for m in members)

    def _p2p_standing(self, m: Membership, status: tuple[int, int]) -> None:
        """An NCCL group carrying p2p ops whose status stood still since the last sample: which
        of them the GPU has not completed (their works are gone once waited for on the CPU)."""
        gid = m.meta["id"]
        if self._standing.get(gid) != status:
            self._standing[gid] = status
            self._in_flight.pop(gid, None)
        elif gid not in self._in_flight:
            entries = self._recorders[m.backend].entries()
            self._in_flight[gid] = p2p_in_flight(entries, m.name, expand_runs(m.meta["ranks"]))

    def read_p2p(self) -> list[P2P]:
        """Every point-to-point channel of this rank, named as its group is in :meth:`read`."""
        if not (dist.is_available() and dist.is_initialized()):
            return []
        return self._p2p.read(self._channel_names, self._in_flight)

    def _channel_names(self, pg: Any, channel: Channel) -> tuple[str, int] | None:
        known = next((ms for ms in self._members.values() if ms[0].pg is pg), None)
        if known is None:
            return None
        m = known[0] if len(known) == 1 else next((k for k in known if (k.backend == "nccl") == channel.cuda), known[0])
        if channel.peer == ANY_SOURCE:
            return m.meta["id"], ANY_SOURCE
        return m.meta["id"], expand_runs(m.meta["ranks"])[channel.peer]

    def baseline(self) -> None:
        """Tell the p2p tracker what the groups that exist already carried before it: on gloo,
        the group's sequence number less its collectives (a full dump, once, at attach)."""
        if _c10d is None or not (dist.is_available() and dist.is_initialized()):
            return
        started = {
            m.name: (m.pg, seq)
            for m in self._memberships()
            if m.backend == "gloo" and (seq := m.pg._get_sequence_number_for_group()) > 0
        }
        if not started:
            return
        collectives: dict[str, int] = {}
        for recorder in self._distinct_recorders():
            for e in recorder.entries():
                name = entry_group(e)
                collectives[name] = max(collectives.get(name, 0), int(e.get("collective_seq_id", 0)))
        for name, (pg, seq) in started.items():
            before = seq - collectives.get(name, 0)
            self._p2p.carried(pg, before)
            if before:
                print(
                    f"distmon: group {name} carried {before} point-to-point ops before distmon attached: its "
                    "collectives are counted right, but its send/recv are numbered from here, so ranks that "
                    "attach at different points disagree; attach before the first send/recv",
                    file=sys.stderr,
                )

    def trace_dump(self, max_bytes: int) -> bytes | None:
        """A full dump in torch's own format (the pickle torch writes on a timeout, which
        ``torchfrtrace`` reads), every recorder in use merged, the oldest entries left out
        until it fits ``max_bytes``. None before this process has a group.

        Only NCCL registers its groups in ``pg_config``; the CPU recorder's is empty (torch
        2.13), and the analyzer cannot place an entry whose group is not there. So the groups
        this process knows are filled in, in NCCL's shape."""
        dumps = [load_dump(r.dump(True), walk_first=False) for r in self._distinct_recorders()]
        if not dumps:
            return None
        merged = dumps[0]
        for more in dumps[1:]:
            merged["entries"] = merged.get("entries", []) + more.get("entries", [])
            for part in ("pg_config", "pg_status"):
                merged.setdefault(part, {}).update(more.get(part, {}))
        config = {name: c for name, c in merged.get("pg_config", {}).items() if name}
        for name, (m, *_) in self._members.items():
            desc = getattr(m.pg, "group_desc", None) or NO_DESCRIPTION
            config.setdefault(name, {"name": name, "desc": desc, "ranks": str(expand_runs(m.meta["ranks"]))})
        merged["pg_config"] = config
        while True:
            data = pickle.dumps(merged)
            entries = merged.get("entries", [])
            if len(data) <= max_bytes:
                return data
            if not entries:
                return None
            merged["entries"] = entries[len(entries) // 2 + 1 :]

    def _memberships(self) -> list[Membership]:
        """Every group this process belongs to, described once; new groups are picked up,
        destroyed ones dropped."""
        world = dist.distributed_c10d._world
        current: dict[str, list[Membership]] = {}
        for pg, name in list(world.pg_names.items()):
            known = self._members.get(name)
            if known is None or known[0].pg is not pg:
                known = _describe(pg, name, world)
                self._recorders.update(find_recorders({m.backend for m in known} - self._recorders.keys()))
            current[name] = known
        self._members = current
        return [m for known in current.values() for m in known]

    def _distinct_recorders(self) -> list[Recorder]:
        return list({id(r): r for r in self._recorders.values()}.values())

    def _ages(self, group: GroupStatus, now: float) -> bool:
        """Set ``since`` for the oldest incomplete collective; True once it has outlived a
        sample. Judged by ``completed``: NCCL enqueues ahead, so a healthy rank often has
        collectives in flight, but its oldest incomplete one keeps changing. A sample with
        none in flight restarts the clock: a rank that issues its next collective after a
        long pause of its own (a checkpoint) has not waited in it through the pause."""
        if group.enqueued <= group.completed:
            self._oldest.pop(group.id, None)
            return False
        seen_completed, seen_at = self._oldest.get(group.id, (group.completed, now))
        if seen_completed != group.completed:
            seen_at = now
        self._oldest[group.id] = (group.completed, seen_at)
        group.since = seen_at
        return seen_at < now

    def _look_up_ops(self, stuck: list[tuple[GroupStatus, Membership]]) -> None:
        """Fill in op and enqueue time of the oldest incomplete collective of each stuck
        group, one full dump per recorder and stuck collective.

        The dump's entries also correct the status dump where it lags: gloo's
        ``last_completed_collective`` was seen stuck below collectives its entries mark
        retired (4 gloo ranks, several groups, torch 2.13), which would look like a hang."""
        todo = [(g, m) for g, m in stuck if self._looked_up.get(g.id, (None,))[0] != g.completed + 1]
        by_recorder: dict[int, list[tuple[GroupStatus, Membership]]] = {}
        for g, m in todo:
            by_recorder.setdefault(id(self._recorders[m.backend]), []).append((g, m))
        for pairs in by_recorder.values():
            entries = self._recorders[pairs[0][1].backend].entries()
            for g, m in pairs:
                mine = collectives_of(entries, m.name)
                retired = g.completed
                while retired < g.enqueued and mine.get(retired + 1, {}).get("retired"):
                    retired += 1
                if retired > g.completed:
                    self._retired[g.id] = retired
                entry = mine.get(retired + 1, {})
                created = entry.get("time_created_ns")
                op = str(entry.get("profiling_name", "")).split(":")[-1] or None
                self._looked_up[g.id] = (retired + 1, op, created / 1e9 if created else None)
        for g, _ in stuck:
            g.completed = max(g.completed, self._retired.get(g.id, 0))
            seq, op, created = self._looked_up[g.id]
            if g.completed >= g.enqueued:
                g.since = None
            elif seq == g.completed + 1:
                g.op = op
                g.since = created or g.since


def _describe(pg: Any, name: str, world: Any) -> list[Membership]:
    """One membership per backend of the group: a group with both ``cpu:gloo`` and
    ``cuda:nccl`` has two sequences, reported as ``name:gloo`` and ``name:nccl``."""
    ranks = sorted(world.pg_group_ranks.get(pg, {}))
    backends = _backends(str(dist.get_backend(pg)))
    desc = getattr(pg, "group_desc", None)
    out = []
    for backend in backends:
        meta = {
            "id": name if len(backends) == 1 else f"{name}:{backend}",
            "backend": backend,
            "size": pg.size(),
            "ranks": rank_runs(ranks),
            "timeout": _timeout(pg, backend),
            "desc": desc if desc and desc != NO_DESCRIPTION else None,
        }
        out.append(Membership(weakref.ref(pg), meta, backend, name))
    return out


def _backends(config: str) -> list[str]:
    """``"gloo"`` -> ["gloo"]; ``"cpu:gloo,cuda:nccl"`` -> ["gloo", "nccl"]."""
    names = [part.split(":")[-1].strip() for part in config.split(",")]
    return sorted({n for n in names if n})


def _timeout(pg: Any, backend: str) -> float | None:
    try:
        device = torch.device("cuda" if backend == "nccl" else "cpu")
        return float(pg._get_backend(device).options._timeout.total_seconds())
    except Exception:
        return None
