"""The Flight Recorder reader on dumps in the format torch documents for NCCL's recorder
(``_dump_nccl_trace``: pickled maps with ``pg_config``, ``pg_status`` keyed by the group's
process-local id, and ``entries`` carrying ``pg_id`` and ``process_group``; point-to-point
ops named ``nccl:send 1->2`` in ranks of the group, a batch of them recorded as its ops plus
one ``nccl:coalesced`` entry), and on what this build of torch offers."""

from __future__ import annotations

import pickle
import weakref
from typing import Any

import pytest

from distmon.flightrecorder.fields import collectives_of as _collectives_of
from distmon.flightrecorder.fields import p2p_in_flight
from distmon.hooks.collectives import GroupReader, Membership, Recorder, _backends, find_recorders
from distmon.hooks.p2p import MAX_CHANNELS, P2PTracker, Traffic, _on_the_gpu
from distmon.wire import P2P, SEND, GroupStatus

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


def test_a_collective_issued_after_a_pause_has_waited_since_it_was_seen() -> None:
    """Rank 0 writes a checkpoint for 12 s with nothing in flight, then enters the barrier
    its peers wait in: its own wait starts at the barrier, not at its last completion."""
    reader = GroupReader()

    def sample(enqueued: int, completed: int, now: float) -> tuple[bool, float | None]:
        group = GroupStatus(
            id="0", backend="gloo", size=3, ranks=[[0, 3, 1]], timeout=None, enqueued=enqueued, completed=completed
        )
        return reader._ages(group, now), group.since

    assert sample(25, 24, 100.0) == (False, 100.0)  # in flight, first seen
    assert sample(25, 25, 101.0) == (False, None)  # done; the checkpoint starts
    assert sample(25, 25, 112.0) == (False, None)
    assert sample(26, 25, 113.0) == (False, 113.0)  # the barrier, seen now: not 12 s old
    assert sample(26, 25, 114.0) == (True, 113.0)  # outlived a sample: stuck, its op looked up


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


def p2p_entry(record_id: int, p2p_seq: int, name: str, retired: bool, coll_seq: int = 9) -> dict[str, Any]:
    """An NCCL point-to-point entry: ``nccl:send 1->2`` in ranks of the group, with the group's
    collective and p2p counters as they stood (both numbered, NCCL keeps them apart)."""
    return {
        **entry(record_id, 1, coll_seq, retired=retired),
        "profiling_name": name,
        "p2p_seq_id": p2p_seq,
        "is_p2p": True,
        "time_created_ns": 1_724_779_000_000_000_000 + record_id * 1_000_000_000,
    }


def coalesced(record_id: int, p2p_seq: int, retired: bool) -> dict[str, Any]:
    """What NCCL records for a batch_isend_irecv besides its ops: one entry with the batch's
    CUDA events, no sizes, ``is_p2p`` false."""
    return {
        **entry(record_id, 1, 9, retired=retired),
        "profiling_name": "nccl:coalesced",
        "p2p_seq_id": p2p_seq,
        "input_sizes": [],
        "output_sizes": [],
    }


GROUP_RANKS = [4, 5, 6, 7]
"""Group "3" in global ranks: its rank 1 is global rank 5."""


def test_nccl_p2p_in_flight_per_channel_in_global_ranks() -> None:
    entries = [
        entry(0, 1, 9),
        p2p_entry(1, 1, "nccl:send 1->2", retired=True),
        p2p_entry(2, 2, "nccl:recv 1<-0", retired=True),
        p2p_entry(3, 3, "nccl:send 1->2", retired=False),
        p2p_entry(4, 4, "nccl:send 1->2", retired=False),
        p2p_entry(5, 5, "nccl:recv 1<-0", retired=False),
        {**p2p_entry(6, 6, "nccl:recv 1<-2", retired=False), "process_group": NAMES[2]},  # another group
    ]
    in_flight = p2p_in_flight(entries, "3", GROUP_RANKS)
    t0 = 1_724_779_000.0
    assert in_flight == {(6, "send"): (2, t0 + 3), (4, "recv"): (1, t0 + 5)}


def test_a_batch_of_p2p_ops_completes_with_its_coalesced_entry() -> None:
    """The ops of a batch_isend_irecv never retire on their own (no events of their own)."""
    done = [p2p_entry(1, 7, "nccl:send 1->2", False), p2p_entry(2, 7, "nccl:recv 1<-0", False), coalesced(3, 7, True)]
    stuck = [p2p_entry(4, 8, "nccl:send 1->2", False), p2p_entry(5, 8, "nccl:recv 1<-0", False), coalesced(6, 8, False)]
    in_flight = p2p_in_flight(done + stuck, "3", GROUP_RANKS)
    t0 = 1_724_779_000.0
    assert in_flight == {(6, "send"): (1, t0 + 4), (4, "recv"): (1, t0 + 5)}


def test_a_coalesced_p2p_batch_is_not_taken_for_a_collective() -> None:
    """It carries the number of the collective before it: it must not shadow that one."""
    entries = [entry(0, 1, 9), coalesced(1, 3, retired=False), entry(2, 1, 10, retired=False)]
    mine = _collectives_of(entries, "3")
    assert mine[9]["profiling_name"] == "nccl:all_reduce" and mine[9]["retired"]
    assert sorted(mine) == [9, 10]


def test_what_the_gpu_says_of_a_channel_overrides_the_cpu() -> None:
    """NCCL's waits return at once, the works are gone: the recorder alone knows what is in flight."""
    state = P2P(group="3", peer=6, dir="send", posted=12, completed=12)
    _on_the_gpu(state, 2, 1000.0)
    assert (state.completed, state.pending, state.blocked, state.blocked_since) == (10, 11, 11, 1000.0)


class FakeGroup:
    """A process group's sequence number, as ``_get_sequence_number_for_group`` reads it."""

    def __init__(self) -> None:
        self.seq = 0

    def _get_sequence_number_for_group(self) -> int:
        return self.seq


def tracked(sequenced: bool) -> tuple[P2PTracker, FakeGroup]:
    tracker, group = P2PTracker(), FakeGroup()
    tracker._traffic[id(group)] = Traffic(weakref.ref(group), sequenced=sequenced)
    return tracker, group


def test_gloo_collective_counts_leave_out_the_p2p_ops_between_them() -> None:
    """gloo's status numbers collective 4 after two sends as 4: it was the second collective."""
    tracker, group = tracked(sequenced=True)
    for op in ("collective", "p2p", "p2p", "collective"):
        group.seq += 1
        if op == "p2p":
            tracker._posted(group, 1, SEND, None, (), {})
    tracker.before_status()
    assert tracker.collectives(group, 4, 4) == (2, 2)
    group.seq += 1
    tracker._posted(group, 1, SEND, None, (), {})
    tracker.before_status()
    assert tracker.collectives(group, 4, 4) == (2, 2), "the same status, after more sends"
    group.seq += 1  # a collective, enqueued; the status of its completion lags
    tracker.before_status()
    assert tracker.collectives(group, 6, 4) == (3, 2), "the lagging completion, as it was counted"


def test_nccl_counts_collectives_apart_and_its_status_is_believed_up_to_them() -> None:
    """NCCL's status takes whichever work came last: a p2p op's number (seqP2P_) is no count of
    collectives, above it or below."""
    tracker, group = tracked(sequenced=False)
    group.seq = 5
    tracker._posted(group, 1, SEND, None, (), {})
    tracker.before_status()
    assert tracker.collectives(group, 17, 17) == (5, 5)
    assert tracker.collectives(group, 17, 3) == (5, 3)


def test_send_recv_peers_beyond_the_followed_are_still_counted(capsys: pytest.CaptureFixture[str]) -> None:
    """A p2p all-to-all over a wide group: the peers past the limit are not followed, but
    their ops still count, so the group's collective count stays right, and the rank says so once."""

    class Group:
        def _get_sequence_number_for_group(self) -> int:
            return 0

    tracker, group = P2PTracker(), Group()
    for peer in range(MAX_CHANNELS + 2):
        tracker._posted(group, peer, "send", None, (), {})
    [(_, traffic)] = tracker.groups()
    assert len(traffic.channels) == MAX_CHANNELS
    assert traffic.posted() == MAX_CHANNELS + 2
    assert capsys.readouterr().err.count(f"more than {MAX_CHANNELS} send/recv peers") == 1


def test_a_rank_waits_while_a_collective_is_in_flight_by_the_status_alone() -> None:
    """Sampled many times a second (:mod:`distmon.hooks.pace_sampler`), from the status dump only:
    issued and not completed; started and not completed where NCCL times its collectives (one
    issued ahead of the GPU is no wait); a group whose status counts a pipeline's sends is left
    out."""
    tracker, pipeline = tracked(sequenced=False)
    reader = GroupReader(tracker)
    dump = NcclRecorder(status(pg0=(5, 4), pg1=(9, 9)), [])
    recorder = Recorder("nccl", dump, names={"0": "0", "1": "3"})
    reader._recorders = {"nccl": recorder}
    assert reader.waiting() is True
    dump.state["pg_status"]["0"]["last_started_collective"] = 4
    assert reader.waiting() is False, "issued, not started: queued behind the GPU's work"
    dump.state = status(pg0=(4, 4), pg1=(10, 9))
    reader._members = {"3": [Membership(weakref.ref(pipeline), {"id": "3"}, "nccl", "3")]}
    assert reader.waiting() is True
    tracker._posted(pipeline, 1, SEND, None, (), {})
    assert reader.waiting() is False, "its status counts sends and receives"
    assert GroupReader().waiting() is None, "no group yet"
