"""What a node's eye saw, as data: encoded and read back within limits, carried through a
relay's columns and merged up a tree of relays, taken into the monitor's sight, recorded and
replayed to the same rules (:mod:`distmon.node.looks`, :mod:`distmon.monitor.outside.sight`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import msgpack
import pytest

from distmon.export.plain import render
from distmon.monitor.intake.feeds import ReplayFeed
from distmon.monitor.outside.sight import ALIVE, GONE, Sight
from distmon.monitor.overview import OverviewTracker
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.readback import load_recording
from distmon.monitor.recording.writer import RecordingWriter
from distmon.monitor.session import Session
from distmon.monitor.state.words import reach_line
from distmon.node import looks as eye_looks
from distmon.node.links import NET, Link
from distmon.node.looks import Looks, Reached, Taken, Wanted, wanted_looks
from distmon.node.proc import Mount, Sample
from distmon.node.pyspy import OutsideStack
from distmon.wire import Report, StackFrame, WireError, encode
from distmon.wire.column_batch import ColumnBatch, column_frames, decode_columns
from distmon.wire.sockets import LOOK, Command, decode_command, encode_command

T0 = 1.7e9


def a_look(pid: int, t: float, state: str = "S", syscall: str | None = "clock_nanosleep") -> Sample:
    return Sample(
        pid, t, state, ppid=1, wchan="hrtimer_nanosleep", syscall=syscall, cpu=1.5, load=0.5, reporter_wakes=12
    )


def node_b() -> Looks:
    stack = OutsideStack(frames=[StackFrame("train.py", 12, "step", "time.sleep(5)")], owns_gil=False)
    samples = [
        a_look(42, 100.0),
        Sample(42, 100.25, "D", syscall="write", target="/ckpt/step.pt", mount=Mount("/ckpt", "nfs", "srv:/x")),
    ]
    return Looks("node-b", samples, [Taken(42, T0 + 3, stack)])


def test_looks_read_back_as_sent() -> None:
    (back,) = eye_looks.decode_looks(eye_looks.encode_looks([node_b()]))
    assert back == node_b()
    reached = [
        Reached("node-c", eye_looks.SSH, eye_looks.UNREACHABLE, "ssh: Connection refused"),
        Reached("node-d", eye_looks.SLURM, eye_looks.SEEN, "", (4, 5, 6, 7)),
    ]
    head = Looks("head", reached=reached)
    assert eye_looks.decode_looks(eye_looks.encode_looks([head])) == [head]


def test_how_the_nodes_reached_fared_is_kept_and_said_with_what_to_do(tmp_path: Path) -> None:
    """The head's eye tells it; the job's facts keep the latest of each node; a report of the
    recording says each node not seen, with why and what to do."""
    monitor = Monitor(recorder=RecordingWriter(str(tmp_path / "r.distmon")))
    told = [
        Reached("node-b", eye_looks.SSH, eye_looks.SILENT, ""),
        Reached("node-c", eye_looks.SSH, eye_looks.UNREACHABLE, "Permission denied (publickey)"),
    ]
    monitor.saw([eye_looks.encode_looks([Looks("head", reached=told)])], T0)
    seen = [Reached("node-b", eye_looks.SSH, eye_looks.SEEN, "")]
    monitor.saw([eye_looks.encode_looks([Looks("head", reached=seen)])], T0 + 1)
    monitor.close()
    reached = monitor.state.told.reached
    assert [r.state for r in reached.values()] == [eye_looks.SEEN, eye_looks.UNREACHABLE]
    line = reach_line(reached["node-c"])
    assert line == (
        "node-c: not reached over ssh (Permission denied (publickey)): check that `ssh node-c` works from here "
        "without a password, or look there"
    )
    assert reach_line(reached["node-b"]) == ""
    assert f"Not seen: {line}" in render(load_recording(str(tmp_path / "r.distmon")))


@pytest.mark.parametrize(
    "claim",
    [
        b"\xc1",
        msgpack.packb({"host": "b"}),
        msgpack.packb([{"host": 3, "fields": [], "samples": [], "stacks": []}]),
        msgpack.packb([{"host": "b", "fields": ["pid", "t"], "samples": [[1, 2.0]], "stacks": []}]),
        msgpack.packb([{"host": "b", "fields": ["pid", "t", "state"], "samples": [[1, "x", "S"]], "stacks": []}]),
        msgpack.packb([{"host": "b", "fields": ["pid", "t", "state"], "samples": [[-1, 1.0, "S"]], "stacks": []}]),
        msgpack.packb([{"host": "b", "fields": [], "samples": [], "stacks": [[1, float("nan"), None, None, 0, 0, 0]]}]),
        msgpack.packb([{"host": "b", "fields": [], "samples": [], "stacks": [[1, 1.0, [[1, 2, 3, 4]], 0, 0, 0, 0]]}]),
        msgpack.packb([{"host": "b" * 5000, "fields": [], "samples": [], "stacks": []}]),
        *(
            msgpack.packb([{"host": "b", "fields": [], "samples": [], "stacks": [], "reached": reached}])
            for reached in (
                [["c", "ssh", "seen", ""], 1],
                [["c", "ssh", "seen", "", ["2"]]],
                [["c", "ssh", "seen", "", [-1]]],
                [["c", "ssh", "seen", "", [0] * 5000]],
            )
        ),
    ],
)
def test_what_is_not_looks_is_refused(claim: bytes) -> None:
    with pytest.raises(WireError, match="malformed_looks"):
        eye_looks.decode_looks(claim)


def test_a_field_a_reader_does_not_know_is_skipped_and_one_it_lacks_is_empty() -> None:
    node = {"host": "b", "fields": ["pid", "t", "state", "later"], "samples": [[7, 1.0, "R", "x"]], "stacks": []}
    (back,) = eye_looks.decode_looks(msgpack.packb([node]))
    assert back.samples == [Sample(7, 1.0, "R")]


def test_looks_travel_with_a_relays_columns_and_merge_up_a_tree() -> None:
    here, there = eye_looks.encode_looks([Looks("node-a", [a_look(1, 5.0)])]), eye_looks.encode_looks([node_b()])
    merged = ColumnBatch.merged([ColumnBatch(looks=[here]), ColumnBatch(looks=[there])])
    back = decode_columns(column_frames(merged))
    assert back.looks == [here, there]
    assert back.slice(0, 0).looks == [here, there], "they stay with a batch's first piece"
    header = msgpack.unpackb(column_frames(ColumnBatch())[1])
    assert "looks" not in header, "a batch without looks is the batch older monitors read"


def test_a_look_command_reaches_the_eyes_and_names_what_to_take() -> None:
    asked = [Wanted("node-b", 42), Wanted("node-b", 43, T0 + 1, stopped=True, tid=44, thread=7 << 40, reporter=45)]
    command = decode_command(encode_command(Command(LOOK, "j", "why", looks=[w.encoded() for w in asked])))
    assert wanted_looks(command.looks or []) == asked
    assert wanted_looks([["node-b", -1, None], ["node-b"], [3, 4, None], ["node-b", 5, ["x", True]]]) == []
    older = [["node-b", 42, None, 44, 7 << 40]]  # an older monitor's: no reporting thread
    assert wanted_looks(older) == [Wanted("node-b", 42, tid=44, thread=7 << 40)]


def test_the_sight_holds_what_each_node_said_and_asks_for_what_the_rules_asked() -> None:
    sight = Sight()
    assert sight.view("node-b", 42) is None and sight.state("node-b", 42) is None
    assert "no distmon relay runs on node-b" in (sight.stack("node-b", 42, T0 + 3) or OutsideStack()).error
    assert sight.wanted() == [], "no eye there: nothing to ask"
    sight.saw([Looks("node-b")], T0)
    assert sight.view("node-b", 42) is None and sight.stack("node-b", 42, T0 + 3) is None
    assert sight.wanted() == [Wanted("node-b", 42)], "the first question starts its eye looking"
    sight.saw([Looks("node-b", [a_look(42, 100.0), a_look(42, 101.0), a_look(42, 100.5, state="R")])], T0 + 1)
    seen = sight.view("node-b", 42)
    assert seen is not None and seen.first is not None and seen.last is not None
    assert (seen.first.t, seen.last.t) == (100.0, 101.0), "a look older than the last one said is out of order"
    assert sight.state("node-b", 42) == ALIVE
    sight.now = T0 + 1.5
    assert seen is not None and sight.view("node-b", 42).now == pytest.approx(101.5), "the monitor's now, on its clock"  # type: ignore[union-attr]
    assert sight.stack("node-b", 42, T0 + 3) is None
    assert Wanted("node-b", 42, T0 + 3) in sight.wanted()
    sight.saw([Looks("node-b", [Sample(42, 102.0, "X"), a_look(42, 103.0)], [node_b().stacks[0]])], T0 + 2)
    assert sight.state("node-b", 42) == GONE and sight.view("node-b", 42).last is None  # type: ignore[union-attr]
    assert sight.stack("node-b", 42, T0 + 3, take=False) == node_b().stacks[0].stack


def test_what_the_eyes_saw_is_recorded_and_a_replay_sees_it_at_the_same_ticks(tmp_path: Path) -> None:
    out = tmp_path / "r.distmon"
    live = Monitor(recorder=RecordingWriter(str(out)))
    said = [(T0 + 0.5, Looks("node-b")), (T0 + 1.2, node_b()), (T0 + 2.4, Looks("node-b", [a_look(42, 102.0)]))]
    for t, looks in said:
        live.saw([eye_looks.encode_looks([looks])], t)
    live.close()
    replayed = Monitor()
    seen_at: dict[float, tuple[float, ...]] = {}

    def tick(now: float) -> None:
        seen = replayed.sight.view("node-b", 42)
        seen_at[now] = tuple(s.t for s in seen.looks) if seen is not None else ()

    session = Session(ReplayFeed(str(out), speed=float("inf")), replayed, on_tick=tick)
    session.drain()
    session.finish()
    assert replayed.sight.eyes.keys() == {"node-b"}
    assert seen_at == {T0 + 1.5: (100.0, 100.25), T0 + 2.5: (100.0, 100.25, 102.0)}
    assert replayed.sight.stack("node-b", 42, T0 + 3, take=False) == node_b().stacks[0].stack


def test_looks_that_are_not_are_counted_as_refused() -> None:
    monitor = Monitor()
    monitor.saw([b"\x00not looks"], T0)
    assert monitor.state.dropped["malformed_looks"] == 1 and not monitor.sight.eyes


def test_a_node_no_eye_watches_is_said_once_where_the_job_is_shown() -> None:
    monitor = Monitor()
    for rank, host in enumerate(["node-a", "node-a", "node-b", "node-b"]):
        monitor.ingest(encode(Report("j", rank, 4, host, 100 + rank, T0, 1, 1.0)), T0)
    assert monitor.state.unwatched_hosts() == [], "no eye has spoken at all: an old recording says nothing of them"
    monitor.saw([eye_looks.encode_looks([Looks("node-a")])], T0 + 0.5)
    assert monitor.state.unwatched_hosts() == ["node-b"]
    assert OverviewTracker().overview(monitor, T0 + 1).blind == "node-b: no relay, judged from its reports only"


def test_the_eyes_are_asked_to_look_at_the_thread_that_trains_and_at_distmons_own() -> None:
    """Under Ray Train a rank trains in a thread of its own: that thread is the one looked at;
    distmon's reporting thread is counted for its wakes."""
    monitor = Monitor()
    monitor.ingest(encode(Report("j", 0, 1, "node-b", 42, T0, 1, 1.0, thread=7 << 40, tid=43, reporter=44)), T0)
    monitor.saw([eye_looks.encode_looks([Looks("node-b")])], T0)
    monitor.sight.view("node-b", 42)
    (look,) = [c for c in monitor.asking() if c.action == LOOK]
    assert wanted_looks(look.looks or []) == [Wanted("node-b", 42, tid=43, thread=7 << 40, reporter=44)]


def test_a_nodes_links_travel_with_its_looks_and_what_changed_is_said() -> None:
    up, cut = Link("eth0", NET, "up", True, 0), Link("eth0", NET, "down", False, 1)
    usual = Link("docker0", NET, "down")
    (back,) = eye_looks.decode_looks(eye_looks.encode_looks([Looks("node-b", links=[up, usual])]))
    assert back.links == [up, usual]
    monitor = Monitor()
    monitor.saw([eye_looks.encode_looks([Looks("node-b", links=[up, usual])])], T0)
    assert monitor.state.links["node-b"].said == (), "a link always down says nothing"
    monitor.saw([eye_looks.encode_looks([Looks("node-b", links=[cut, usual])])], T0 + 5)
    (change,) = monitor.state.links["node-b"].downs(T0)
    assert change.words == "eth0 went down (carrier lost)" and change.t == T0 + 5


def test_a_look_taken_before_its_eye_was_lost_is_no_evidence_after_it() -> None:
    """Node B's relay falls silent: what its eye saw is forgotten, it is asked nothing and says
    nothing until heard again, and a stack cannot be taken there, for want of an eye. That a
    process was seen gone stays."""
    sight = Sight()
    sight.saw([Looks("node-b", [a_look(42, 100.0, "R", "running"), a_look(42, 101.0, "R", "running")])], T0)
    sight.saw([Looks("node-b", [a_look(43, 100.0), Sample(43, 100.5, "X")])], T0 + 0.5)
    assert sight.state("node-b", 42) == ALIVE and sight.watched("node-b")
    sight.wanted()
    sight.blind({"node-b"})
    assert not sight.watched("node-b") and sight.view("node-b", 42) is None and sight.state("node-b", 42) is None
    assert "the eye on node-b is lost" in (sight.stack("node-b", 42, T0 + 3) or OutsideStack()).error
    assert sight.wanted() == [], "nothing asked of a lost eye"
    sight.blind(set())
    assert sight.view("node-b", 42) is None, "its looks from before it was lost are gone"
    assert sight.state("node-b", 43) == GONE and sight.ended(T0) == [("node-b", 43, T0 + 0.5)]
    sight.saw([Looks("node-b", [a_look(42, 130.0)])], T0 + 30)
    seen = sight.view("node-b", 42)
    assert seen is not None and seen.first is not None and seen.first.t == 130.0


def test_a_reading_of_the_links_is_timed_by_the_eye_that_read_it_though_it_comes_late() -> None:
    """Node B cut off: its eye read eth0 down at 200.0 and up at 203.0 on its clock, and both
    readings come together once it is heard again, ten seconds after the first; the changes
    are said at the times they were read."""
    up, cut = Link("eth0", NET, "up", True, 0), Link("eth0", NET, "down", False, 1)
    (back,) = eye_looks.decode_looks(eye_looks.encode_looks([Looks("node-b", links=[up], read=190.0)]))
    assert back.read == 190.0
    monitor = Monitor()
    monitor.saw([eye_looks.encode_looks([Looks("node-b", [a_look(42, 190.0)], links=[up], read=190.0)])], T0 - 10)
    late = [Looks("node-b", links=[cut], read=200.0), Looks("node-b", links=[replace(up, flaps=1)], read=203.0)]
    monitor.saw([eye_looks.encode_looks(late)], T0 + 10)
    went = [(c.went, c.t) for c in monitor.state.links["node-b"].said]
    assert went == [("down", T0), ("up", T0 + 3)], went
