"""The Flight Recorder reader on NCCL-shaped dumps (torch 2.5 to 2.10) and on hostile bytes."""

from __future__ import annotations

import json
import os
import pickle

import pytest

from distmon.flightrecorder import fields, loading
from distmon.flightrecorder.fields import group_ranks, read_dump
from distmon.flightrecorder.loading import DumpError, load_dump
from distmon.wire import RECV, SEND, expand_runs
from tests.support.nccl_dumps import VERSIONS, Group, RankRecorder, megatron, member_group


def members_of(groups: dict[str, Group]) -> dict[str, list[int]]:
    return {name: sorted(g.ranks) for name, g in groups.items()}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("form", ["pickle", "json"])
def test_every_version_and_form_reads_alike(version: str, form: str) -> None:
    recorder = RankRecorder(0, version=version)
    world = Group("0", "default_pg", [0, 1])
    recorder.join(world)
    recorder.collective("0", "all_reduce")
    recorder.collective("0", "_all_gather_base", done=False)
    raw = recorder.pickle() if form == "pickle" else recorder.json()
    dump = load_dump(raw)
    assert dump["version"] == version
    (group,) = read_dump(dump, {"0": [0, 1]}).groups
    assert (group.id, group.enqueued, group.completed, group.op) == ("0", 2, 1, "_all_gather_base")
    assert group.backend == "nccl" and group.timeout == 600 and group.desc == "default_pg"
    assert expand_runs(group.ranks) == [0, 1]
    assert group.since == recorder.entries[1]["time_created_ns"] / 1e9
    assert fields.enqueued(dump["pg_status"]["0"]) == 2


def test_torch_2_3s_dumps_count_collectives_and_sends_in_one_number() -> None:
    """Version 1.5: the entries carry ``seq_id`` alone; a send is known by its name."""
    stage = Group("0", "default_pg", [0, 1])
    recorders = [RankRecorder(rank) for rank in (0, 1)]
    for r in recorders:
        r.join(stage)
        r.collective("0", "all_reduce")
    recorders[0].send("0", 1)
    recorders[1].recv("0", 0)
    recorders[0].collective("0", "all_reduce", done=False)
    read = [read_dump(load_dump(r.torch_2_3()), {"0": [0, 1]}, r.rank) for r in recorders]
    # the send was the group's work #2: torch 2.3's watchdog says so too ("last completed NCCL work: 2")
    assert [(g.enqueued, g.completed, g.op) for g in read[0].groups] == [(3, 2, "all_reduce")]
    assert [(g.enqueued, g.completed) for g in read[1].groups] == [(1, 1)]
    assert read[0].oldest_pending is not None and read[0].oldest_pending["collective_seq_id"] == 3
    # numbered in the one count on both ends alike, so a send still meets its receive
    assert [(p.peer, p.dir, p.posted, p.completed) for p in read[1].p2p] == [(0, RECV, 2, 2)]
    assert [(p.peer, p.dir, p.posted) for p in read[0].p2p] == [(1, SEND, 2)]


def test_torch_2_2s_dumps_are_their_entries_alone_and_name_the_default_group_only() -> None:
    """A bare list: each entry's group by its id on this rank, its time in microseconds. Id 0 is the default
    group on every rank; another id counts only this rank's groups, so its work is read as no group's."""
    world, pair = Group("0", "default_pg", [0, 1, 2, 3]), Group("1", "", [2, 3])
    recorder = RankRecorder(2)
    recorder.join(world)
    recorder.join(pair)
    recorder.collective("0", "all_reduce")
    recorder.collective("1", "all_gather")
    recorder.collective("0", "all_reduce", done=False)
    dump = load_dump(recorder.torch_2_2())
    assert [e["time_created_ns"] for e in dump["entries"]] == [e["time_created_ns"] for e in recorder.entries]
    read = read_dump(dump, {}, 2)
    assert [(g.id, g.enqueued, g.completed, g.op) for g in read.groups] == [("0", 2, 1, "all_reduce")]
    assert read.oldest_pending is not None and read.oldest_pending["collective_seq_id"] == 2
    assert load_dump(pickle.dumps([], protocol=2))["entries"] == [], "a rank that did no work yet"
    with pytest.raises(DumpError, match="not a Flight Recorder dump"):
        load_dump(pickle.dumps([{"name": "x"}], protocol=2))


def test_an_empty_json_dump_has_no_entries_key_and_no_groups() -> None:
    recorder = RankRecorder(3)
    recorder.join(Group("0", "default_pg", [0, 1, 2, 3]))
    dump = load_dump(recorder.json())
    rank = read_dump(dump, {})
    assert rank.groups == [] and rank.t is None and rank.unnamed == []


def test_pg_ids_are_named_through_the_entries_on_each_rank() -> None:
    """Megatron's shape: a rank's local id 1 is its own tensor group, a different group on each."""
    recorders, groups = megatron(tp=2, pp=2, dp=2)
    for r in recorders:
        tp = member_group(groups, "TENSOR_MODEL_PARALLEL_GROUP", r.rank)
        r.collective(tp.name, "all_reduce")
    read = [read_dump(load_dump(r.pickle()), members_of(groups)) for r in recorders]
    assert len(recorders[0].groups) >= 20
    assert read[0].groups[0].id != read[2].groups[0].id
    assert {g.id for g in read[0].groups} == {member_group(groups, "TENSOR_MODEL_PARALLEL_GROUP", 0).name}
    assert recorders[0].pg_ids[read[0].groups[0].id] == recorders[2].pg_ids[read[2].groups[0].id]


def test_collectives_are_counted_apart_from_the_p2p_numbers_in_pg_status() -> None:
    """A pipeline group's status says 3 (the p2p counter) while its collectives number 1; in a
    group of two, the p2p counter numbers the ops of both ends alike, so it numbers the channels."""
    r = RankRecorder(0)
    pp = Group("5", "PIPELINE_MODEL_PARALLEL_GROUP", [0, 4])
    r.join(pp)
    r.collective("5", "all_reduce")
    r.send("5", 4)
    r.recv("5", 4)
    r.send("5", 4, done=False)
    dump = load_dump(r.pickle())
    assert dump["pg_status"]["0"]["last_enqueued_collective"] == 3
    rank = read_dump(dump, {"5": [0, 4]})
    (group,) = rank.groups
    assert (group.enqueued, group.completed, group.op) == (1, 1, None)
    send = next(c for c in rank.p2p if c.dir == SEND)
    recv = next(c for c in rank.p2p if c.dir == RECV)
    assert (send.peer, send.posted, send.completed, send.blocked) == (4, 3, 2, 3)
    assert (recv.peer, recv.posted, recv.completed, recv.blocked) == (4, 3, 2, None)
    assert send.blocked_since == r.entries[3]["time_created_ns"] / 1e9


def test_group_local_p2p_peers_map_to_global_ranks_through_the_sorted_ranks() -> None:
    r = RankRecorder(12)
    r.join(Group("7", "PIPELINE_MODEL_PARALLEL_GROUP", [12, 4, 8, 0]))
    r.send("7", 0, done=False)
    assert r.entries[0]["profiling_name"] == "nccl:send 3->0"
    (channel,) = read_dump(load_dump(r.pickle()), {"7": [0, 4, 8, 12]}).p2p
    assert (channel.peer, channel.dir, channel.blocked) == (0, SEND, 1)


def test_a_coalesced_collective_waits_on_its_coalesced_entry() -> None:
    r = RankRecorder(0)
    r.join(Group("0", "default_pg", [0, 1]))
    r.coalesced("0", ["all_reduce", "all_reduce"], done=True)
    r.coalesced("0", ["_reduce_scatter_base", "_reduce_scatter_base"], done=False)
    (group,) = read_dump(load_dump(r.pickle()), {"0": [0, 1]}).groups
    assert (group.enqueued, group.completed, group.op) == (2, 1, "_reduce_scatter_base")


def test_a_batch_of_p2p_ops_completes_with_its_batch_entry() -> None:
    r = RankRecorder(1)
    r.join(Group("3", "PIPELINE_MODEL_PARALLEL_GROUP", [0, 1, 2]))
    r.batch_p2p("3", [("send", 2), ("recv", 0)], done=True)
    r.batch_p2p("3", [("send", 2), ("recv", 0)], done=False)
    rank = read_dump(load_dump(r.pickle()), {"3": [0, 1, 2]})
    # in a group of three the p2p counter matches nothing on the other end: the pending ops are numbered
    assert {(c.peer, c.dir, c.posted, c.completed, c.pending) for c in rank.p2p} == {
        (2, SEND, 1, 0, 1),
        (0, RECV, 1, 0, 1),
    }
    assert rank.groups[0].enqueued == 0
    assert rank.oldest_pending is not None and rank.oldest_pending["profiling_name"] == "nccl:send 1->2"


def test_last_started_completed_and_oldest_pending() -> None:
    r = RankRecorder(0)
    r.join(Group("0", "default_pg", [0, 1]))
    r.collective("0", "all_reduce")
    r.collective("0", "broadcast", done=False)
    r.collective("0", "all_reduce", done=False)
    rank = read_dump(load_dump(r.pickle()), {})
    assert rank.last_completed is not None and rank.last_completed["collective_seq_id"] == 1
    assert rank.oldest_pending is not None and rank.oldest_pending["profiling_name"] == "nccl:broadcast"
    assert rank.t == r.entries[-1]["time_created_ns"] / 1e9


def test_group_ranks_from_config() -> None:
    assert group_ranks({"ranks": "[0, 4, 8, 12]"}) == [0, 4, 8, 12]
    assert group_ranks({"ranks": [3, 1]}) == [1, 3]
    assert group_ranks({"ranks": "[]"}) is None
    assert group_ranks({"ranks": {"a": 1}}) is None


class CallsAFunction:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("echo owned",))


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (pickle.dumps({"version": "2.10", "entries": [CallsAFunction()]}, protocol=2), "refused"),
        (RankRecorder(0).pickle()[:-7], "truncated"),
        (b"hello, this is a log\n", "not a Flight Recorder dump"),
        (pickle.dumps([1, 2, 3], protocol=2), "not a Flight Recorder dump"),
        (json.dumps({"version": "2.10", "entries": {"a": 1}}).encode(), "not a list"),
        (b"{" * 100_000, "unreadable"),
        (b"[" * 100_000, "not a Flight Recorder dump"),
    ],
)
def test_hostile_and_broken_dumps_get_one_line(raw: bytes, words: str) -> None:
    with pytest.raises(DumpError, match=words) as caught:
        load_dump(raw)
    assert "\n" not in str(caught.value)


def test_too_many_entries_and_too_many_bytes_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loading, "MAX_ENTRIES", 10)
    with pytest.raises(DumpError, match="11 entries"):
        load_dump(pickle.dumps({"version": "2.10", "entries": [{}] * 11}, protocol=2))
    monkeypatch.setattr(loading, "MAX_DUMP_FILE_BYTES", 1000)
    with pytest.raises(DumpError, match="over the 0 MiB"):
        load_dump(b"\x80" + b"x" * 2000)


def test_a_structure_that_doubles_at_each_level_is_never_walked() -> None:
    """A few hundred bytes of pickle that reference one list twice per level: printing it would
    take 2**60 steps. Fields are read by type, so it is taken as absent."""
    bomb: list[object] = []
    for _ in range(60):
        bomb = [bomb, bomb]
    r = RankRecorder(0)
    r.join(Group("0", "default_pg", [0, 1]))
    r.collective("0", "all_reduce", done=False)
    dump = r.dump()
    dump["entries"][0].update(profiling_name=bomb, process_group=("0", bomb), state=bomb, pg_id=bomb)
    raw = pickle.dumps(dump, protocol=2)
    assert len(raw) < 2000
    (group,) = read_dump(load_dump(raw), {}).groups
    assert group.op is None and group.desc == "default_pg"  # from pg_config, not the bomb


def test_a_huge_string_where_a_name_belongs_is_taken_as_absent() -> None:
    r = RankRecorder(0)
    r.join(Group("0", "default_pg", [0, 1]))
    r.collective("0", "all_reduce", done=False)
    dump = r.dump()
    dump["entries"][0]["profiling_name"] = "nccl:" + "x" * 10_000_000
    (group,) = read_dump(load_dump(pickle.dumps(dump, protocol=2)), {}).groups
    assert group.op is None and group.backend == "unknown"
