"""Collective sequence numbers of every process group, from PyTorch's Flight Recorder.

The Flight Recorder's status dump (a few microseconds) gives, per group, the last
enqueued and completed sequence number; DDP's and FSDP's collectives, issued from C++,
are counted there too. When one collective stays in flight across two samples, a full
dump (milliseconds, so once per stuck collective) names its op and enqueue time.
"""

from __future__ import annotations

import pickle
import time
from typing import Any

import torch
import torch.distributed as dist

from distmon.wire import GroupStatus, rank_runs

try:
    from torch._C._distributed_c10d import _dump_fr_trace
except ImportError:  # torch built without distributed, or before the Flight Recorder
    _dump_fr_trace = None


class GroupReader:
    """Turns Flight Recorder dumps into :class:`GroupStatus` records, one per group."""

    def __init__(self) -> None:
        self._meta: dict[str, dict[str, Any]] = {}
        self._inflight: dict[str, tuple[int, float]] = {}
        self._looked_up: dict[str, tuple[int, str | None, float | None]] = {}

    def read(self) -> list[GroupStatus]:
        if _dump_fr_trace is None or not (dist.is_available() and dist.is_initialized()):
            return []
        status = _load(_dump_fr_trace(includeCollectives=False, includeStackTraces=False))
        seqs = status.get("pg_status", {})
        now = time.time()
        groups = []
        stuck = []
        for pg, name in list(dist.distributed_c10d._world.pg_names.items()):
            meta = self._meta.get(name) or self._describe(pg, name)
            entry = seqs.get(name, {})
            enqueued = int(entry.get("last_enqueued_collective", 0))
            completed = int(entry.get("last_completed_collective", 0))
            started = int(entry.get("last_started_collective", -1))
            group = GroupStatus(
                enqueued=enqueued,
                completed=completed,
                started=started if started >= 0 else None,
                **meta,
            )
            if enqueued > completed:
                seen_seq, seen_at = self._inflight.get(name, (enqueued, now))
                if seen_seq != enqueued:
                    seen_at = now
                self._inflight[name] = (enqueued, seen_at)
                group.since = seen_at
                if seen_at < now:
                    stuck.append(group)
            else:
                self._inflight.pop(name, None)
            groups.append(group)
        if stuck:
            self._look_up_ops(stuck)
        return groups

    def _describe(self, pg: Any, name: str) -> dict[str, Any]:
        world = dist.distributed_c10d._world
        ranks = sorted(world.pg_group_ranks.get(pg, {}))
        meta = {
            "id": name,
            "backend": str(dist.get_backend(pg)),
            "size": pg.size(),
            "ranks": rank_runs(ranks),
            "timeout": _timeout(pg),
            "desc": getattr(pg, "group_desc", None) or None,
        }
        self._meta[name] = meta
        return meta

    def _look_up_ops(self, stuck: list[GroupStatus]) -> None:
        """Fill in op and enqueue time of collectives stuck in flight, one full dump each."""
        todo = [g for g in stuck if self._looked_up.get(g.id, (None,))[0] != g.enqueued]
        if todo:
            dump = _load(_dump_fr_trace(includeCollectives=True, includeStackTraces=False))
            for group in todo:
                op, created = _find_entry(dump.get("entries", []), group.id, group.enqueued)
                self._looked_up[group.id] = (group.enqueued, op, created)
        for group in stuck:
            seq, op, created = self._looked_up[group.id]
            if seq == group.enqueued:
                group.op = op
                group.since = created or group.since


def _find_entry(entries: list[dict[str, Any]], name: str, seq: int) -> tuple[str | None, float | None]:
    for entry in reversed(entries):
        pg_name = (entry.get("process_group") or ("",))[0]
        if pg_name == name and entry.get("collective_seq_id") == seq:
            op = str(entry.get("profiling_name", "")).split(":")[-1] or None
            created = entry.get("time_created_ns")
            return op, created / 1e9 if created else None
    return None, None


def _timeout(pg: Any) -> float | None:
    try:
        backend = pg._get_backend(torch.device("cuda" if torch.cuda.is_initialized() else "cpu"))
        return backend.options._timeout.total_seconds()
    except Exception:
        return None


def _load(raw: bytes) -> dict[str, Any]:
    """The Flight Recorder's own dump format is a pickle, produced by torch in this process."""
    return pickle.loads(raw)
