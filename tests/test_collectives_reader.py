"""The Flight Recorder reader on dumps in the format torch documents for NCCL's recorder
(``_dump_nccl_trace``: pickled maps with ``pg_config``, ``pg_status`` keyed by the group's
process-local id, and ``entries`` carrying ``pg_id`` and ``process_group``), and on what
this build of torch offers."""

from __future__ import annotations

import pickle
from typing import Any

from distmon.hooks.collectives import Recorder, _backends, _collectives_of, find_recorders

NAMES = {0: ("0", "default_pg"), 1: ("3", "mesh_tp"), 2: ("5", "mesh_dp")}
"""pg_id -> (group name, desc) on this rank: ids count this process's groups, names the job's."""


def entry(record_id: int, pg_id: int, seq: int, op: str = "all_reduce", retired: bool = True) -> dict[str, Any]:
    return {
        "frames": [{"name": "train_step", "filename": "train.py", "line": 88}],
        "record_id": record_id,
        "pg_id": pg_id,
        "process_group": NAMES[pg_id],
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "op_id": record_id + 1,
        "profiling_name": f"nccl:{op}",
        "time_created_ns": 1_724_779_239_936_775_119 + record_id * 1000,
        "input_sizes": [[3, 4]],
        "input_dtypes": ["Float"],
        "output_sizes": [[3, 4]],
        "output_dtypes": ["Float"],
        "state": "completed" if retired else "scheduled",
        "time_discovered_started_ns": None,
        "time_discovered_completed_ns": None,
        "retired": retired,
        "timeout_ms": 600_000,
        "is_p2p": False,
    }


def status(**seqs: tuple[int, int]) -> dict[str, Any]:
    return {
        "version": "2.5",
        "pg_config": {name: {"name": name, "desc": desc, "ranks": "[0, 1]"} for name, desc in NAMES.values()},
        "pg_status": {
            pg_id.lstrip("pg"): {
                "last_enqueued_collective": enqueued,
                "last_started_collective": -1,
                "last_completed_collective": completed,
            }
            for pg_id, (enqueued, completed) in seqs.items()
        },
    }


class NcclRecorder:
    """What ``_dump_nccl_trace`` returns, and how often it was asked for a full dump."""

    def __init__(self, state: dict[str, Any], entries: list[dict[str, Any]]) -> None:
        self.state = state
        self.entries = entries
        self.full_dumps = 0

    def __call__(self, collectives: bool) -> bytes:
        if not collectives:
            return pickle.dumps(self.state)
        self.full_dumps += 1
        return pickle.dumps({**self.state, "entries": self.entries})


def test_status_is_keyed_by_group_name_through_the_entries() -> None:
    entries = [
        entry(0, 0, 1),
        entry(1, 1, 8),
        entry(2, 2, 4),
        entry(3, 1, 9),
        *(entry(4 + k, 1, 10 + k, retired=False) for k in range(3)),
    ]
    dump = NcclRecorder(status(pg0=(1, 1), pg1=(12, 9), pg2=(4, 4)), entries)
    recorder = Recorder("nccl", dump)
    by_name = recorder.status_by_name()
    assert {name: (s["last_enqueued_collective"], s["last_completed_collective"]) for name, s in by_name.items()} == {
        "0": (1, 1),
        "3": (12, 9),
        "5": (4, 4),
    }
    recorder.status_by_name()
    assert dump.full_dumps == 1, "names are learnt once"


def test_a_group_whose_entries_were_evicted_is_named_once_it_issues_again() -> None:
    dump = NcclRecorder(status(pg0=(1, 1), pg2=(4, 4)), [entry(0, 0, 1)])
    recorder = Recorder("nccl", dump)
    assert set(recorder.status_by_name()) == {"0"}
    recorder.status_by_name()
    assert dump.full_dumps == 1, "no full dump per sample for a group that has not moved"
    dump.state = status(pg0=(1, 1), pg2=(5, 4))
    dump.entries = [entry(0, 0, 1), entry(9, 2, 5, retired=False)]
    assert set(recorder.status_by_name()) == {"0", "5"}
    assert dump.full_dumps == 2


def test_the_oldest_incomplete_collective_is_found_by_group_and_seq() -> None:
    entries = [entry(0, 1, 9), entry(1, 2, 9, op="reduce_scatter"), entry(2, 1, 10, op="all_gather", retired=False)]
    entries.append({**entry(3, 1, 10, op="send", retired=False), "is_p2p": True})
    mine = _collectives_of(entries, "3")
    assert sorted(mine) == [9, 10]
    assert mine[10]["profiling_name"] == "nccl:all_gather" and not mine[10]["retired"]


def test_backends_of_a_group() -> None:
    assert _backends("gloo") == ["gloo"]
    assert _backends("cpu:gloo,cuda:nccl") == ["gloo", "nccl"]
    assert _backends("nccl") == ["nccl"]


def test_this_build_reads_gloo_from_the_cpu_recorder_and_has_no_nccl_recorder() -> None:
    """The CPU wheel of torch 2.13: ``_dump_fr_trace`` without a ``backend`` argument, and
    no ``_dump_nccl_trace``. A GPU build gives NCCL groups their own recorder."""
    recorders = find_recorders({"gloo", "nccl"})
    assert set(recorders) == {"gloo"}
    assert recorders["gloo"].status_by_name() == {}
