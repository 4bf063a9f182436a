"""The wire schema: round trips, versions, and every way a message can be wrong."""

from __future__ import annotations

import contextlib

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from distmon.channel import Batch, Relay, batch_frames, decode_batch
from distmon.wire import (
    EXITED,
    FRAME_VERSION,
    GPU_FAULT,
    GROUP_FIELDS,
    GROUP_ROW,
    HAS_GPU,
    HEADER,
    HEADER_FIELDS,
    MAX_MESSAGE_BYTES,
    RAISED,
    STALLED,
    VERSION,
    WORKER_DEAD,
    ExceptionInfo,
    ExitInfo,
    Frame,
    GpuStatus,
    GroupStatus,
    Loader,
    Memory,
    Report,
    StepStats,
    WireError,
    Worker,
    decode,
    encode,
    expand_runs,
    gpu_util,
    name_hash,
    rank_runs,
    report_bytes,
)


def minimal_report() -> Report:
    return Report(job="j", rank=3, world=8, host="node-1", pid=4242, t=1.7e9, n=5, interval=1.0)


def full_report() -> Report:
    """Every field set, every nested type present."""
    frame = Frame(file="train.py", line=42, func="step", code="loss.backward()")
    return Report(
        job="job-7",
        rank=3,
        world=8,
        host="node-1",
        pid=4242,
        t=1_700_000_000.5,
        n=17,
        interval=1.0,
        local_rank=3,
        torch="2.13.0",
        backend="nccl",
        steps=120,
        forwards=121,
        last_step_t=1_700_000_000.25,
        step_time=StepStats(n=100, mean=0.21, p50=0.2, max=0.9, last=0.19),
        data_wait=0.05,
        groups=[
            GroupStatus(
                id="0",
                backend="nccl",
                size=8,
                ranks=[[0, 8, 1]],
                timeout=600.0,
                enqueued=241,
                completed=240,
                started=241,
                desc="default_pg",
                op="all_reduce",
                since=1_700_000_000.1,
            )
        ],
        stalled_since=1_699_999_990.0,
        stack=[frame],
        memory=Memory(rss=2**31, host_total=2**36, host_available=2**35, shm_total=2**30, shm_free=2**29),
        gpu=GpuStatus(
            index=3,
            allocated=2**33,
            reserved=2**34,
            peak=2**34,
            used=2**34,
            total=2**36,
            util=97.0,
            temp=71.0,
            power=310.5,
            throttle=["sw_power_cap"],
            xid=79,
            ecc=0,
        ),
        loaders=[
            Loader(
                id=1,
                expected=2,
                workers=[
                    Worker(pid=5000, alive=True, rss=2**27),
                    Worker(pid=5001, alive=False, signal="SIGKILL"),
                ],
            )
        ],
        exception=ExceptionInfo(
            type="RuntimeError", message="CUDA out of memory", where=frame, traceback=[frame], t=1.7e9
        ),
        exit=ExitInfo(how="exception", t=1.7e9),
    )


def raw(report: Report) -> dict:
    """The report inside the frame, as a map: what a bare (version 1) message was."""
    return msgpack.unpackb(report_bytes(encode(report)))


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
    assert header["flags"] == EXITED | RAISED | STALLED | WORKER_DEAD | GPU_FAULT | HAS_GPU
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
    message = raw(minimal_report())
    assert None not in message.values()
    assert "exception" not in message and "gpu" not in message
    assert message["v"] == VERSION


def test_integers_are_accepted_for_floats():
    message = raw(minimal_report())
    message["t"] = 1_700_000_000
    report = decode(msgpack.packb(message))
    assert report.t == 1_700_000_000.0 and isinstance(report.t, float)


def test_fields_from_a_newer_sender_of_the_same_version_are_ignored():
    message = raw(full_report())
    message["future_field"] = {"anything": [1, 2]}
    message["groups"][0]["future_field"] = "x"
    assert decode(msgpack.packb(message)) == full_report()


@pytest.mark.parametrize("version", [None, 0, VERSION + 1, "1"])
def test_other_schema_versions_are_refused(version):
    message = raw(minimal_report())
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
    message = raw(full_report())
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


def decodes_or_refuses(data: bytes) -> None:
    """A report or a :class:`WireError`: anything else escaping ``decode`` fails the test."""
    with contextlib.suppress(WireError):
        assert isinstance(decode(data), Report)


@given(st.binary(max_size=2048))
def test_random_bytes_raise_only_wire_errors(data):
    decodes_or_refuses(data)


msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(sorted(raw(full_report()))), inner, max_size=6)
    ),
    max_leaves=30,
)


@given(msgpack_values)
def test_random_structures_raise_only_wire_errors(value):
    decodes_or_refuses(msgpack.packb(value))


@given(st.data())
def test_corrupted_reports_raise_only_wire_errors(data):
    """A real report with bytes overwritten: the nearest a fuzzer gets to valid messages."""
    message = bytearray(encode(full_report()))
    for _ in range(data.draw(st.integers(1, 8))):
        message[data.draw(st.integers(0, len(message) - 1))] = data.draw(st.integers(0, 255))
    decodes_or_refuses(bytes(message))


@given(st.data())
def test_reports_with_one_field_replaced_raise_only_wire_errors(data):
    message = raw(full_report())
    key = data.draw(st.sampled_from(sorted(message)))
    message[key] = data.draw(msgpack_values)
    decodes_or_refuses(msgpack.packb(message))


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
