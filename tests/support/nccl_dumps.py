"""Flight Recorder dumps in NCCL's shape, built from the formats (``/work/shared/nccl-formats.md``):
what a GPU job of torch 2.5 to 2.10 leaves behind, for tests and benchmarks."""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field
from typing import Any

T0_NS = 1_795_000_000_000_000_000
VERSIONS = ("2.5", "2.6", "2.7", "2.8", "2.9", "2.10")


@dataclass
class Group:
    name: str
    desc: str
    ranks: list[int]


@dataclass
class RankRecorder:
    """One rank's NCCL Flight Recorder: groups get local ids in the order this rank creates them."""

    rank: int
    version: str = "2.10"
    pg_ids: dict[str, int] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)
    entries: list[dict[str, Any]] = field(default_factory=list)
    seq: dict[str, int] = field(default_factory=dict)
    p2p: dict[str, int] = field(default_factory=dict)
    status: dict[str, list[int]] = field(default_factory=dict)
    """name -> [enqueued, started, completed] as NCCL counts them: the last work's number."""

    def join(self, group: Group) -> None:
        self.pg_ids[group.name] = len(self.pg_ids)
        self.groups[group.name] = group
        self.status[group.name] = [0, -1, 0]

    def collective(self, name: str, op: str, done: bool = True, seq: int | None = None) -> dict[str, Any]:
        self.seq[name] = seq if seq is not None else self.seq.get(name, 0) + 1
        return self._add(name, f"nccl:{op}", False, done, self.seq[name])

    def send(self, name: str, peer: int, done: bool = True) -> dict[str, Any]:
        return self._p2p(name, peer, "send", done)

    def recv(self, name: str, peer: int, done: bool = True) -> dict[str, Any]:
        return self._p2p(name, peer, "recv", done)

    def _p2p(self, name: str, peer: int, direction: str, done: bool) -> dict[str, Any]:
        ranks = sorted(self.groups[name].ranks)
        me, them = ranks.index(self.rank), ranks.index(peer)
        arrow = f"{me}->{them}" if direction == "send" else f"{me}<-{them}"
        self.p2p[name] = self.p2p.get(name, 0) + 1
        return self._add(name, f"nccl:{direction} {arrow}", True, done, self.p2p[name])

    def coalesced(self, name: str, ops: list[str], done: bool = True) -> None:
        """Grouped collectives: one number, each op recorded (2.7 on), then ``nccl:coalesced``."""
        seq = self.seq.get(name, 0) + 1
        for op in ops:
            self.seq[name] = seq
            self._add(name, f"nccl:{op}", False, False, seq)
        self.seq[name] = seq
        self._add(name, "nccl:coalesced", False, done, seq)

    def batch_p2p(self, name: str, peers: list[tuple[str, int]], done: bool = True) -> None:
        """``batch_isend_irecv``: its ops, never retired themselves, then the batch's entry."""
        start = len(self.entries)
        for direction, peer in peers:
            self._p2p(name, peer, direction, False)
            self.p2p[name] -= 1
        self.p2p[name] = self.p2p.get(name, 0) + 1
        for e in self.entries[start:]:
            e["p2p_seq_id"] = self.p2p[name]
        entry = self._add(name, "nccl:coalesced", True, done, self.p2p[name])
        entry["input_sizes"] = []

    def _add(self, name: str, profiling: str, is_p2p: bool, done: bool, seq: int) -> dict[str, Any]:
        group = self.groups[name]
        created = T0_NS + (len(self.entries) + 1) * 1_000_000_000
        entry: dict[str, Any] = {
            "record_id": len(self.entries),
            "pg_id": self.pg_ids[name],
            "process_group": (group.name, group.desc),
            "thread_name": "pt_main_thread",
            "thread_id": "140000000000000",
            "collective_seq_id": self.seq.get(name, 0),
            "p2p_seq_id": self.p2p.get(name, 0),
            "op_id": len(self.entries) + 1,
            "profiling_name": profiling,
            "time_created_ns": created,
            "input_sizes": [[1024]],
            "input_dtypes": ["BFloat16"],
            "output_sizes": [[1024]],
            "output_dtypes": ["BFloat16"],
            "state": "completed" if done else "scheduled",
            "time_discovered_started_ns": created + 1000 if done else None,
            "time_discovered_completed_ns": created + 2000 if done else None,
            "retired": done,
            "timeout_ms": 600_000,
            "is_p2p": is_p2p,
        }
        self.entries.append(entry)
        status = self.status[name]
        status[0] = seq
        if done:
            status[2] = seq
        return entry

    def dump(self) -> dict[str, Any]:
        version = self.version
        out: dict[str, Any] = {"version": version}
        out["comm_lib_version" if version in ("2.10",) else "nccl_version"] = "2.27.3"
        out["pg_config"] = {
            g.name: {"name": g.name, "desc": g.desc, "ranks": str(sorted(g.ranks))} for g in self.groups.values()
        }
        out["pg_status"] = {
            str(self.pg_ids[n]): {
                "last_enqueued_collective": s[0],
                "last_started_collective": s[1],
                "last_completed_collective": s[2],
            }
            for n, s in self.status.items()
        }
        out["entries"] = [dict(e) for e in self.entries]
        return out

    def torch_2_3(self) -> bytes:
        """The dump as torch 2.3 pickled it (version 1.5): one ``seq_id`` counting a group's
        collectives and sends and receives together, no ``is_p2p``, dtypes, or ``pg_status``."""
        dump = self.dump()
        dump.update(version="1.5")
        del dump["pg_status"], dump["comm_lib_version"]
        counted: dict[Any, int] = {}
        for e in dump["entries"]:
            if e["profiling_name"] != "nccl:coalesced" or not e["is_p2p"]:
                counted[e["pg_id"]] = counted.get(e["pg_id"], 0) + 1
            e["seq_id"] = counted[e["pg_id"]]
            for key in ("collective_seq_id", "p2p_seq_id", "is_p2p", "input_dtypes", "output_dtypes", "timeout_ms"):
                del e[key]
        return pickle.dumps(dump, protocol=2)

    def torch_2_2(self) -> bytes:
        """The dump as torch 2.2 pickled it: its entries alone, a list, each with its group's id on this rank,
        one ``seq_id`` as torch 2.3's, its time in microseconds, no process group, dtypes or timeout."""
        entries = pickle.loads(self.torch_2_3())["entries"]
        keys = ("pg_id", "seq_id", "profiling_name", "input_sizes", "output_sizes", "state", "retired")
        return pickle.dumps(
            [
                {**{k: e[k] for k in keys}, "time_created_us": e["time_created_ns"] // 1000, "frames": []}
                for e in entries
            ],
            protocol=2,
        )

    def pickle(self) -> bytes:
        return pickle.dumps(self.dump(), protocol=2)

    def json(self) -> bytes:
        dump = self.dump()
        if not dump["entries"]:
            del dump["entries"]
        for status in dump["pg_status"].values():  # torch's JSON writes the counts as strings
            status.update({k: str(v) for k, v in status.items()})
        for e in dump.get("entries", []):
            for key in ("time_discovered_started_ns", "time_discovered_completed_ns"):
                e[key] = e[key] or 0
        return json.dumps(dump).encode()


def nested_tuple_key(depth: int) -> bytes:
    """A dump whose ``pg_status`` is keyed by a tuple ``depth`` deep: hashing it overflows
    the C stack (a million deep) or raises RecursionError."""
    head = pickle.dumps({"version": "2.10", "entries": []}, protocol=2)[:-2]  # the dict, open
    return head + b"\x8c\x09pg_status}" + b")" + b"\x85" * depth + b"}s" + b"u."


HASH_PRIME = (1 << 61) - 1
"""Python hashes an int modulo this prime: its multiples all hash alike."""


def colliding_keys(n: int) -> bytes:
    """A dump whose ``pg_status`` has ``n`` keys sharing one hash, the multiples of
    :data:`HASH_PRIME`: the pickle written as bytes, for building that dict here would take the
    quadratic time the reader must refuse to spend."""
    head = pickle.dumps({"version": "2.10", "entries": []}, protocol=2)[:-2]  # the dict, open
    keys = b"".join(pickle.dumps(k * HASH_PRIME, protocol=2)[2:-1] + b"}" for k in range(1, n + 1))
    return head + b"\x8c\x09pg_status}(" + keys + b"uu."


def megatron(tp: int, pp: int, dp: int) -> tuple[list[RankRecorder], dict[str, Group]]:
    """Recorders of a TP x PP x DP job in Megatron's shape: the world group, then per rank its
    tensor, pipeline, data, model, embedding and position groups, ... (each rank creates every
    group of the job, but joins only its own; local ids follow creation, so differ across ranks
    only by the groups a rank is not in). Groups are named by creation order."""
    world = tp * pp * dp
    layout: list[tuple[str, list[list[int]]]] = [("default_pg", [list(range(world))])]
    layout.append(("TENSOR_MODEL_PARALLEL_GROUP", [[s + t for t in range(tp)] for s in range(0, world, tp)]))
    stride = tp * dp
    layout.append(("PIPELINE_MODEL_PARALLEL_GROUP", [list(range(i, world, stride)) for i in range(stride)]))
    layout.append(
        ("DATA_PARALLEL_GROUP", [[p * stride + d * tp + t for d in range(dp)] for p in range(pp) for t in range(tp)])
    )
    layout.append(
        ("MODEL_PARALLEL_GROUP", [[p * stride + d * tp + t for p in range(pp) for t in range(tp)] for d in range(dp)])
    )
    layout.append(("EMBEDDING_GROUP", [sorted({i, i + (pp - 1) * stride}) for i in range(stride)]))
    layout.append(("POSITION_EMBEDDING_GROUP", [[i] for i in range(stride)]))
    for extra in range(14):
        layout.append((f"MEGATRON_EXTRA_{extra}", [list(range(world))]))
    groups: dict[str, Group] = {}
    recorders = [RankRecorder(rank) for rank in range(world)]
    for desc, partitions in layout:
        for members in partitions:
            group = Group(str(len(groups)), desc, members)
            groups[group.name] = group
            for rank in members:
                recorders[rank].join(group)
    return recorders, groups


def member_group(groups: dict[str, Group], desc: str, rank: int) -> Group:
    return next(g for g in groups.values() if g.desc.startswith(desc) and rank in g.ranks)
