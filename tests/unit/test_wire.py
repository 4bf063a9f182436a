"""The wire schema: round trips, versions, and every way a message can be wrong."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from distmon.wire import (
    FLAG_EXITED,
    FLAG_GPU_FAULT,
    FLAG_HAS_GPU,
    FLAG_RAISED,
    FLAG_STALLED,
    FLAG_WORKER_DEAD,
    FRAME_VERSION,
    GROUP_FIELDS,
    GROUP_ROW,
    HEADER,
    HEADER_FIELDS,
    MAX_MESSAGE_BYTES,
    VERSION,
    ExceptionInfo,
    WireError,
    decode,
    encode,
    exception_message,
    expand_runs,
    gpu_util,
    name_hash,
    rank_runs,
    report_bytes,
)
from distmon.wire.sockets import Batch, Relay, batch_frames, decode_batch
from tests.support.messages import full_report, minimal_report, report_map


def reason_of(data: bytes) -> str:
    with pytest.raises(WireError) as caught:
        decode(data)
    return caught.value.reason


@pytest.mark.parametrize("report", [minimal_report(), full_report()], ids=["minimal", "full"])
def test_round_trip_keeps_every_field(report):
    assert decode(encode(report)) == report


def test_a_frame_leads_with_the_numbers_the_monitor_judges_by():
    """The header and rows carry, unpacked with fixed offsets, what a monitor reads of every
    rank every second; the whole report follows."""
    report = full_report()
    frame = encode(report)
    header = dict(zip((name for name, _ in HEADER_FIELDS), HEADER.unpack_from(frame), strict=True))
    assert (header["version"], header["rank"], header["world"], header["n"]) == (FRAME_VERSION, 3, 8, 17)
    assert (header["job"], header["host"]) == (name_hash("job-7"), name_hash("node-1"))
    assert (header["steps"], header["t"], header["gpu_total"]) == (120, 1_700_000_000.5, 2**36)
    assert (
        header["flags"] == FLAG_EXITED | FLAG_RAISED | FLAG_STALLED | FLAG_WORKER_DEAD | FLAG_GPU_FAULT | FLAG_HAS_GPU
    )
    assert (header["groups"], header["channels"], header["stack"] != 0) == (1, 0, True)
    group = dict(zip((name for name, _ in GROUP_FIELDS), GROUP_ROW.unpack_from(frame, HEADER.size), strict=True))
    assert group == {"id": name_hash("0"), "enqueued": 241, "completed": 240, "since": 1_700_000_000.1,
                     "op": name_hash("all_reduce")}  # fmt: skip
    assert header["report"] == len(report_bytes(frame)) == len(frame) - HEADER.size - GROUP_ROW.size


def test_the_gpu_utilization_reads_without_the_rest_of_the_report():
    assert gpu_util(encode(full_report())) == 97.0
    assert gpu_util(encode(minimal_report())) is None
    assert gpu_util(encode(full_report())[:-1]) is None, "malformed"
    foreign = msgpack.packb({"v": VERSION + 1, "gpu": {"util": 50.0}})
    assert gpu_util(foreign) is None, "another version"


def test_the_exception_message_reads_without_the_rest_of_the_report():
    """What the monitor reads of a rank that newly raised, to judge it (issue 42)."""
    report = full_report()
    assert report.exception is not None and exception_message(encode(report)) == report.exception.message
    assert exception_message(encode(minimal_report())) is None
    assert exception_message(encode(report)[:-1]) is None, "malformed"
    foreign = msgpack.packb({"v": VERSION, "exception": {"message": 7}})
    assert exception_message(foreign) is None, "not a message"


def test_an_exception_raised_where_no_frame_was_kept_travels():
    """``where`` is None when the traceback has no frames: left out on the wire, None again."""
    report = minimal_report()
    report.exception = ExceptionInfo(type="MemoryError", message="", where=None, traceback=[], t=1.7e9)
    assert decode(encode(report)) == report


def test_a_bare_report_as_version_1_sent_it_is_still_read():
    assert decode(report_bytes(encode(full_report()))) == full_report()


def test_a_frame_whose_parts_do_not_add_up_is_malformed():
    frame = encode(minimal_report())
    assert reason_of(frame[: HEADER.size - 1]) == "malformed"
    assert reason_of(frame[:-1]) == "malformed"


def test_absent_fields_cost_nothing_on_the_wire():
    message = report_map(minimal_report())
    assert None not in message.values()
    assert "exception" not in message and "gpu" not in message
    assert message["v"] == VERSION


def test_integers_are_accepted_for_floats():
    message = report_map(minimal_report())
    message["t"] = 1_700_000_000
    report = decode(msgpack.packb(message))
    assert report.t == 1_700_000_000.0 and isinstance(report.t, float)


def test_fields_from_a_newer_sender_of_the_same_version_are_ignored():
    message = report_map(full_report())
    message["future_field"] = {"anything": [1, 2]}
    message["groups"][0]["future_field"] = "x"
    assert decode(msgpack.packb(message)) == full_report()


@pytest.mark.parametrize("version", [None, 0, VERSION + 1, "1"])
def test_other_schema_versions_are_refused(version):
    message = report_map(minimal_report())
    message["v"] = version
    assert reason_of(msgpack.packb(message)) == "version"


def test_foreign_msgpack_map_is_refused_by_version():
    assert reason_of(msgpack.packb({"type": "metrics", "value": 1.0})) == "version"


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\xc1",
        b'{"rank": 0}',
        b"GET / HTTP/1.1\r\n\r\n",
        msgpack.packb([1, 2, 3]),
        msgpack.packb({1: 2}),
        b"\x91" * 100_000 + b"\xc0",
        b"\xdd\xff\xff\xff\xff",
    ],
    ids=["empty", "reserved byte", "json", "http", "list", "int keys", "deep", "huge length"],
)
def test_foreign_bytes_are_malformed(data):
    assert reason_of(data) == "malformed"


def test_every_truncation_is_malformed():
    data = encode(full_report())
    for end in range(len(data)):
        assert reason_of(data[:end]) == "malformed", f"cut at {end} of {len(data)}"


def test_trailing_bytes_are_malformed():
    assert reason_of(encode(minimal_report()) + b"\x00") == "malformed"


@pytest.mark.parametrize(
    ("change", "names"),
    [
        (lambda m: m.pop("rank"), "rank"),
        (lambda m: m.update(rank="3"), "rank"),
        (lambda m: m.update(rank=True), "rank"),
        (lambda m: m.update(steps=1.5), "steps"),
        (lambda m: m.update(t="now"), "t"),
        (lambda m: m.update(groups={}), "groups"),
        (lambda m: m["groups"].append(7), "groups"),
        (lambda m: m["groups"][0].pop("enqueued"), "enqueued"),
        (lambda m: m["groups"][0].update(ranks=[[0, "8", 1]]), "ranks"),
        (lambda m: m["stack"][0].update(line=None, file=b"train.py"), "file"),
        (lambda m: m["loaders"][0]["workers"][0].update(alive=1), "alive"),
        (lambda m: m["exception"].update(where=[]), "where"),
        (lambda m: m.update(memory=42), "memory"),
    ],
)
def test_wrong_fields_are_malformed_and_named(change, names):
    message = report_map(full_report())
    change(message)
    with pytest.raises(WireError) as caught:
        decode(msgpack.packb(message))
    assert caught.value.reason == "malformed"
    assert names in str(caught.value)


def test_oversized_messages_are_refused_unread():
    report = minimal_report()
    report.exception = ExceptionInfo(type="E", message="x" * MAX_MESSAGE_BYTES, where=None, traceback=[], t=0.0)
    assert reason_of(encode(report)) == "oversized"
    assert reason_of(b"\xc1" * (MAX_MESSAGE_BYTES + 1)) == "oversized"


@pytest.mark.parametrize(
    ("ranks", "runs"),
    [
        ([], []),
        ([5], [[5, 1, 1]]),
        (list(range(8)), [[0, 8, 1]]),
        (list(range(0, 64, 8)), [[0, 8, 8]]),
        ([0, 1, 2, 10, 20, 30], [[0, 3, 1], [10, 3, 10]]),
    ],
)
def test_rank_runs(ranks, runs):
    assert rank_runs(ranks) == runs
    assert expand_runs(runs) == ranks


@given(st.sets(st.integers(0, 100_000)))
def test_rank_runs_round_trip(ranks):
    ordered = sorted(ranks)
    runs = rank_runs(ordered)
    assert expand_runs(runs) == ordered
    assert len(runs) <= max(1, len(ordered))


def test_a_batch_tells_what_was_dropped_on_the_way_and_merging_keeps_it_by_relay() -> None:
    near, far = Relay("node1:7", "node1"), Relay("node2:8", "node2")
    below = Batch.of([encode(minimal_report())], relay=far)
    below.dropped = {0: 5}
    top = Batch.merged([Batch.of([], relay=near), below])
    top.dropped[0] = 2
    told = decode_batch(batch_frames(top))
    assert told.losses() == {far: 5, near: 2} and len(told) == 1
    assert decode_batch(batch_frames(Batch.of([], relay=near))).dropped == {}, "nothing dropped, nothing said"


@pytest.mark.parametrize("dropped", [[[2, 1]], [[0, 0]], [[0, -3]], [[0, 2**41]], "x", [[0]]])
def test_dropped_counts_that_name_no_relay_or_make_no_sense_are_refused(dropped: object) -> None:
    tag, header, payload = batch_frames(Batch.of([], relay=Relay("node1:7", "node1")))
    forged = msgpack.packb({**msgpack.unpackb(header), "dropped": dropped})
    with pytest.raises(WireError):
        decode_batch([tag, forged, payload])
