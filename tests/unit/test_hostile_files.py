"""Hostile and broken files (issue 31): crafted recordings, dumps, logs and folders. A file
that cannot be read is one line naming it and what is wrong, and exit code 2 where nothing
could be read; damage inside a recording skips what is damaged and says so in one line;
reading holds at most one record in memory and ends in bounded time whatever the file
claims; text from a file is shown, never obeyed."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import subprocess
import sys
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

import msgpack
import pytest

from distmon.flightrecorder.loading import DumpError
from distmon.flightrecorder.loading import load_dump as load_dump
from distmon.forensics.analysis import analyze
from distmon.guards.text import visible, visible_lines
from distmon.monitor.recording import readback
from distmon.monitor.recording.format import AlertEvent, BatchRecord, MessageRecord
from distmon.monitor.recording.readback import load_recording
from distmon.monitor.recording.reader import RecordingError, read_recording
from distmon.monitor.recording.writer import RecordingWriter
from distmon.monitor.state.alerts import Alert, Change
from distmon.wire import Report, encode
from distmon.wire.sockets import Batch, Relay
from tests.support.commands import distmon
from tests.support.nccl_dumps import Group, RankRecorder, colliding_keys, nested_tuple_key
from tests.support.paths import DATA
from tests.support.simulate import SimJob

HEADER = msgpack.packb({"format": "distmon-recording", "version": 1, "created": 1_700_000_000.0})
HEADER_V2 = msgpack.packb({"format": "distmon-recording", "version": 2, "created": 1_700_000_000.0})
PEAK_MB = 150
"""More than the Python interpreter and distmon's imports, far less than any claim below."""
MEASURER = """
import json, os, sys
import distmon.commands.replay, distmon.commands.report
from distmon.cli import main
for line in sys.stdin:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(write, 2)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        code = 1
        try:
            code = main(json.loads(line))
        finally:
            sys.stderr.flush()
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as said:
        stderr = said.read()
    _, status, usage = os.wait4(pid, 0)
    peak = usage.ru_maxrss / 1024
    print(json.dumps({"code": os.waitstatus_to_exitcode(status), "stderr": stderr, "peak_mb": peak}), flush=True)
"""
"""A process with distmon imported that runs each command asked of it in a child of its own, as
``python -m distmon`` would run it, and says its exit code, stderr and peak memory: the child's own
(each a fresh process's, less the interpreter's start)."""


@pytest.fixture(scope="module")
def run_measured() -> Iterator[Callable[..., dict]]:
    """A distmon command, its exit code, stderr and peak memory (MB)."""
    measurer = subprocess.Popen(
        [sys.executable, "-c", MEASURER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert measurer.stdin is not None and measurer.stdout is not None

    def run(*args: str) -> dict:
        measurer.stdin.write(json.dumps(args) + "\n")  # type: ignore[union-attr]
        measurer.stdin.flush()  # type: ignore[union-attr]
        return json.loads(measurer.stdout.readline())  # type: ignore[union-attr]

    yield run
    measurer.stdin.close()
    measurer.wait(timeout=30)


def message(t: float = 1_700_000_001.0) -> bytes:
    report = Report(job="j", rank=0, world=1, host="h", pid=1, t=t, n=0, interval=1.0)
    return msgpack.packb(["m", t, encode(report)])


CRAFTED = {
    "deep nesting": (HEADER + message() + b"\x91" * 200_000, "nested too deep"),
    "a map of four billion entries": (HEADER + b"\xdf\xff\xff\xff\xff" + b"\xc0" * 1000, "max_map_len"),
    "an array of four billion items": (HEADER + b"\xdd\xff\xff\xff\xff" + b"\xc0" * 1000, "max_array_len"),
    "a two-megabyte string": (HEADER + b"\xdb\x00\x20\x00\x00" + b"x" * 3_000_000, "max_str_len"),
    "a two-gigabyte string": (HEADER + b"\xdb\x7f\xff\xff\xff" + b"x" * 10_000_000, "a record over"),
    "a two-megabyte payload": (
        HEADER + b"\x93\xa1m\xcb" + b"\x00" * 8 + b"\xc6\x00\x20\x00\x00" + b"\x00" * 2**21,
        "max_bin_len",
    ),
    "a two-gigabyte payload": (HEADER + b"\xc6\x7f\xff\xff\xff" + b"\x00" * 10_000_000, "a record over"),
    "a million empty maps": (HEADER + b"\xdd\x00\x0f\x42\x40" + b"\x80" * 1_000_000, "max_array_len"),
    "a time beyond any clock": (HEADER + message(1e300), "a record at time"),
    "a time that is not a number": (HEADER + msgpack.packb(["m", float("nan"), b""]), "a record at time"),
    "a header from no clock": (msgpack.packb({"format": "distmon-recording", "version": 1, "created": "x"}), "header"),
}


def deflated(*parts: bytes, end: bool = False) -> bytes:
    """``parts`` through one zlib stream, flushed as the writer does, ended if ``end``."""
    deflate = zlib.compressobj()
    out = b"".join(deflate.compress(part) for part in parts)
    return out + deflate.flush(zlib.Z_FINISH if end else zlib.Z_SYNC_FLUSH)


NOISE = random.Random(18).randbytes(6 * 2**20)
"""Bytes that do not compress: a claim inside them reaches the reader's limits, not its
compression-bomb check."""
V2 = HEADER_V2 + deflated(message())
BOMBS = {
    "v2: a bomb of zeros": ([b"\x00" * 2**20] * 300, "compression bomb"),
    "v2: a bomb of records": ([msgpack.packb(["d", 1_700_000_000.0, {}]) * 50_000] * 300, "compression bomb"),
    "v2: a bomb in one record": ([b"\xc6\x7f\xff\xff\xff", *[b"\x00" * 2**20] * 300], "bomb"),
}
"""Compression bombs, by the parts a writer would deflate: compressed only by the tests that read
one (300 MiB through zlib takes seconds, and every test worker collects this file)."""


@cache
def bombed(case: str) -> bytes:
    return HEADER_V2 + deflated(*BOMBS[case][0])


CRAFTED_V2 = {
    "v2: a two-gigabyte payload": (HEADER_V2 + deflated(b"\xc6\x7f\xff\xff\xff" + NOISE), "a record over"),
    "v2: a two-megabyte payload": (
        HEADER_V2 + deflated(b"\x93\xa1m\xcb" + b"\x00" * 8 + b"\xc6\x00\x20\x00\x00" + NOISE[: 2**21]),
        "max_bin_len",
    ),
    "v2: a map of four billion entries": (
        HEADER_V2 + deflated(b"\xdf\xff\xff\xff\xff" + b"\xc0" * 1000),
        "max_map_len",
    ),
    "v2: deep nesting": (HEADER_V2 + deflated(message() + b"\x91" * 200_000), "nested too deep"),
    "v2: a time beyond any clock": (HEADER_V2 + deflated(message(1e300)), "a record at time"),
    "v2: garbage after the header": (HEADER_V2 + b"garbage " * 1000, "incorrect header check"),
    "v2: uncompressed records after the header": (HEADER_V2 + message() * 100, "incorrect header check"),
    "v2: garbage inside the stream": (V2 + NOISE[:100_000], "is damaged at record 2 (by byte"),
    "v2: bytes after the end": (HEADER_V2 + deflated(message(), end=True) + message(), "bytes follow the end"),
    "v2: a header from no clock": (
        msgpack.packb({"format": "distmon-recording", "version": 2, "created": -1}) + deflated(message()),
        "header",
    ),
}


READ_BEFORE = {
    "deep nesting",
    "v2: a bomb of records",
    "v2: deep nesting",
    "v2: garbage inside the stream",
    "v2: bytes after the end",
}
"""The crafted files whose whole records before the damage are read: exit code 0."""


@pytest.mark.parametrize("command", ["report", "replay"])
@pytest.mark.parametrize("case", [*CRAFTED, *BOMBS, *CRAFTED_V2])
def test_a_crafted_recording_is_one_line_exit_2_and_bounded_memory(
    tmp_path: Path, command: str, case: str, run_measured: Callable[..., dict]
) -> None:
    content, reason = (bombed(case), BOMBS[case][1]) if case in BOMBS else {**CRAFTED, **CRAFTED_V2}[case]
    path = tmp_path / "crafted.distmon"
    path.write_bytes(content)
    result = run_measured(command, str(path))
    assert result["code"] == (0 if case in READ_BEFORE else 2), result["stderr"]
    lines = result["stderr"].strip().splitlines()
    assert len(lines) == 1 and reason in lines[0], result["stderr"]
    assert lines[0].startswith(f"distmon {command}: {path}")
    assert result["peak_mb"] < PEAK_MB


def test_a_claim_longer_than_the_file_is_a_torn_tail(tmp_path: Path, run_measured: Callable[..., dict]) -> None:
    path = tmp_path / "torn.distmon"
    path.write_bytes(HEADER + message() + b"\xdb\x7f\xff\xff\xff" + b"x" * 3_000_000)
    result = run_measured("report", str(path))
    assert result["code"] == 0, result["stderr"]
    assert result["peak_mb"] < PEAK_MB


def test_absurd_counts_inside_valid_records_are_kept_out(tmp_path: Path, run_measured: Callable[..., dict]) -> None:
    """A recording whose messages claim absurd ranks and world sizes, and drop counts that
    are not counts: reported like any other, the claims refused and counted."""
    path = tmp_path / "absurd.distmon"
    writer = RecordingWriter(str(path))
    for rank, world in [(0, 2), (1, 2), (10**18, 2), (3, 10**18), (-1, 2), *((r, 2) for r in range(2, 20_000))]:
        # bare reports, as version 1 sent them (still read): no frame header holds such numbers
        report = Report("j", rank, world, "h", 100 + rank, 1.7e9, 0, 1.0)
        writer.message(1_700_000_001.0, msgpack.packb(dataclasses.asdict(report), use_bin_type=True))
    writer._write(["d", 1_700_000_002.0, {"no_key": 3, "bogus": "many", "negative": -5, "huge": 2**64 - 1}])
    writer.close()
    result = run_measured("report", str(path))
    assert result["code"] == 0, result["stderr"]
    pm = load_recording(str(path))
    assert sorted(pm.state.ranks) == [0, 1] and pm.state.world == 2
    assert pm.state.dropped == {"rank_out_of_range": 20_000 - 2 + 2, "world_too_large": 1, "no_key": 3}
    assert result["peak_mb"] < PEAK_MB


def test_alert_text_beyond_the_cap_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readback, "MAX_ALERT_BYTES", 10_000)
    path = tmp_path / "alerts.distmon"
    writer = RecordingWriter(str(path))
    for i in range(20):
        writer.alert(1_700_000_000.0 + i, Change("raised", Alert("hang", "critical", [0], 1.7e9, "s", "d" * 1000)))
    writer.close()
    with pytest.raises(RecordingError, match="MiB of alerts"):
        load_recording(str(path))


def small_recording(path: Path) -> list[object]:
    """A version 2 recording of every kind of record, and the records as written."""
    writer = RecordingWriter(str(path))
    frames = [encode(Report("j", r, 4, "h", 100 + r, 1.7e9, 0, 1.0)) for r in range(4)]
    alert = Alert("hang", "critical", [2], 1.7e9 + 3, "stuck", "evidence")
    writer.message(1.7e9 + 1, frames[0])
    writer.batch(1.7e9 + 2, Batch.of(frames[1:], Relay("node-b:7", "node-b")))
    writer.alert(1.7e9 + 3, Change("raised", alert))
    writer.dropped(1.7e9 + 4, Counter({"malformed": 2}))
    writer.batch(1.7e9 + 5, Batch(relays=[Relay("node-b:7", "node-b")]))
    writer.message(1.7e9 + 6, frames[3])
    writer.close()
    return list(read_recording(str(path))[1])


def test_a_recording_cut_at_any_byte_reads_up_to_its_last_whole_record(tmp_path: Path) -> None:
    whole = tmp_path / "whole.distmon"
    records = small_recording(whole)
    assert [type(r).__name__ for r in records] == [
        "MessageRecord", "BatchRecord", "AlertEvent", "Dropped", "BatchRecord", "MessageRecord"
    ]  # fmt: skip
    content = whole.read_bytes()
    cut = tmp_path / "cut.distmon"
    read = []
    for n in range(len(content)):
        cut.write_bytes(content[:n])
        if n < len(HEADER_V2):
            with pytest.raises(RecordingError, match=r"is empty|ends inside its header"):
                read_recording(str(cut))
            continue
        got = list(read_recording(str(cut))[1])
        assert got == records[: len(got)], n
        read.append(len(got))
    assert read == sorted(read) and read[0] == 0 and read[-1] == len(records)


def test_everything_up_to_the_last_flush_reads_back(tmp_path: Path) -> None:
    """A crash, or a full disk, loses only what came after the last flush."""
    path = tmp_path / "run.distmon"
    writer = RecordingWriter(str(path))
    flushed = []
    for t, raw in SimJob(world=4).stream(until=5):
        writer.message(t, raw)
        if writer.records % 4 == 0:
            writer.sync()
            flushed.append((path.stat().st_size, writer.records))
    writer.close()
    content = path.read_bytes()
    cut = tmp_path / "cut.distmon"
    for size, count in flushed:
        cut.write_bytes(content[:size])
        assert len(list(read_recording(str(cut))[1])) == count


def test_a_version_1_file_still_reads_and_reports(tmp_path: Path) -> None:
    """The records of a version 1 file are those of the same file in version 2."""
    v2 = tmp_path / "v2.distmon"
    records = small_recording(v2)
    v1 = tmp_path / "v1.distmon"
    written = [
        ["m", r.t, r.payload] if isinstance(r, MessageRecord) else
        ["a", r.t, r.event, r.alert.to_json(), r.alert.key] if isinstance(r, AlertEvent) else
        ["d", r.t, dict(r.dropped + r.unwatched)]
        for r in records
        if not isinstance(r, BatchRecord)
    ]  # fmt: skip
    v1.write_bytes(HEADER + b"".join(msgpack.packb(w) for w in written))
    header, read = read_recording(str(v1))
    assert header["version"] == 1
    assert list(read) == [r for r in records if not isinstance(r, BatchRecord)]
    header, read = read_recording(str(DATA / "hang-rank2.distmon"))
    kinds = Counter(type(r).__name__ for r in read)
    assert header["version"] == 1 and kinds == {"MessageRecord": 52, "AlertEvent": 5}


# Issue 31: every file a user hands us is safe to open.

ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[31mFAKE CULPRIT rank 99\x1b[0m"


def hang_dumps(folder: Path, world: int = 8, stuck: int = 5) -> dict[int, RankRecorder]:
    """A job whose rank ``stuck`` never issues its third all-reduce: one dump per rank."""
    folder.mkdir(exist_ok=True)
    recorders = {}
    for rank in range(world):
        r = RankRecorder(rank)
        r.join(Group("0", "default_pg", list(range(world))))
        for step in range(3):
            if step < 2 or rank != stuck:
                r.collective("0", "all_reduce", done=step < 2)
        recorders[rank] = r
        (folder / f"nccl_trace_rank_{rank}").write_bytes(r.pickle())
    return recorders


def test_a_million_deep_tuple_key_is_one_line_and_the_other_dumps_are_analysed(tmp_path: Path) -> None:
    hang_dumps(tmp_path)
    (tmp_path / "nccl_trace_rank_2").write_bytes(nested_tuple_key(1_000_000))
    done = distmon("analyze", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "nccl_trace_rank_2: nested deeper than 100 levels" in done.stdout
    assert done.stdout.startswith("Read 7 dumps")  # the other ranks' dumps


@pytest.mark.parametrize("depth", [200, 5_000, 1_000_000])
def test_a_deep_pickle_is_refused_before_it_is_built(depth: int) -> None:
    with pytest.raises(DumpError, match="nested deeper than 100 levels"):
        load_dump(nested_tuple_key(depth))


def test_keys_that_share_a_hash_are_refused_at_once() -> None:
    raw = colliding_keys(40_000)
    started = time.monotonic()
    with pytest.raises(DumpError, match="keyed by other than names and small numbers"):
        load_dump(raw)
    assert time.monotonic() - started < 10.0, "refused before the quadratic build (minutes)"


@pytest.mark.parametrize("command", ["analyze", "report", "replay"])
def test_a_fifo_is_refused_unopened(tmp_path: Path, command: str) -> None:
    """A FIFO among the dumps, or named as a recording: nothing blocks on it."""
    if command == "analyze":
        hang_dumps(tmp_path)
        os.unlink(tmp_path / "nccl_trace_rank_3")
        fifo = tmp_path / "nccl_trace_rank_3"
        os.mkfifo(fifo)
        done = distmon("analyze", str(tmp_path), timeout=30)
        assert done.returncode == 0, done.stderr
        assert f"{fifo}: a FIFO, not a file: not opened" in done.stdout
        assert done.stdout.startswith("Read 7 dumps")
        return
    fifo = tmp_path / "x.distmon"
    os.mkfifo(fifo)
    done = distmon(command, str(fifo), timeout=30)
    assert done.returncode == 2
    assert done.stderr.strip() == f"distmon {command}: cannot open {fifo}: a FIFO, not a file: not opened"


def recording_with_alert(path: Path, alert: dict[str, object], t: float = 1.7e9 + 1) -> None:
    writer = RecordingWriter(str(path))
    writer.message(1.7e9, encode(Report("j", 0, 1, "h", 100, 1.7e9, 0, 1.0)))
    writer._write(["a", t, "raised", alert, "key"])
    writer.close()


def an_alert(**fields: object) -> dict[str, object]:
    return {**Alert("hang", "critical", [0], 1.7e9, "rank 0 holds up the job", "evidence").to_json(), **fields}


@pytest.mark.parametrize("form", [[], ["--json"]])
def test_an_alert_at_an_infinite_time_is_skipped_and_counted(tmp_path: Path, form: list[str]) -> None:
    path = tmp_path / "inf.distmon"
    recording_with_alert(path, an_alert(t=float("inf")))
    done = distmon("report", str(path), *form)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert "is damaged at record 2" in line and "1 damaged record skipped, the rest read" in line


def test_records_three_thousand_years_apart_replay_in_a_few_seconds(tmp_path: Path) -> None:
    path = tmp_path / "gap.distmon"
    writer = RecordingWriter(str(path))
    for t in (1.0, 3000 * 365.25 * 86400):
        writer.message(t, encode(Report("j", 0, 1, "h", 100, t, 0, 1.0)))
    writer.close()
    done = distmon("replay", "--headless", str(path), timeout=60)
    assert done.returncode == 0, done.stderr
    assert "1 silence(s) with no record" in done.stderr and "played as 3600 s" in done.stderr


def assert_shown_not_obeyed(output: str) -> None:
    assert "\x1b" not in output and "\x07" not in output
    assert "\\x1b[31mFAKE CULPRIT rank 99" in output


def test_escapes_in_a_dump_are_shown_not_obeyed(tmp_path: Path) -> None:
    recorders = hang_dumps(tmp_path)
    for rank, r in recorders.items():
        for e in r.entries:
            e["process_group"] = ("0", "default_pg" + ESCAPES)
            e["profiling_name"] = "nccl:all_reduce" + ESCAPES
        (tmp_path / f"nccl_trace_rank_{rank}").write_bytes(r.pickle())
    done = distmon("analyze", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert_shown_not_obeyed(done.stdout)
    ranks = json.loads(distmon("analyze", "--json", str(tmp_path)).stdout)["ranks"]
    assert any(g["op"] == "all_reduce" + ESCAPES for r in ranks for g in r["groups"])  # kept as data


def test_escapes_in_a_recorded_alert_are_shown_not_obeyed(tmp_path: Path) -> None:
    path = tmp_path / "escapes.distmon"
    recording_with_alert(path, an_alert(summary=ESCAPES, detail=ESCAPES + "\nsecond line"))
    done = distmon("report", str(path))
    assert done.returncode == 0, done.stderr
    assert_shown_not_obeyed(done.stdout)
    assert json.loads(distmon("report", "--json", str(path)).stdout)[0]["summary"] == ESCAPES


def test_visible_escapes_controls_and_cuts_long_values() -> None:
    assert visible("a\x1b[2Jb\nc\u202ed") == "a\\x1b[2Jb\\x0ac\\u202ed"
    assert visible_lines("a\x1bb\nc") == "a\\x1bb\nc"
    assert visible("x" * 1000, 10) == "x" * 10 + "…[990 more chars]"


def test_a_huge_version_in_a_header_is_not_echoed(tmp_path: Path) -> None:
    path = tmp_path / "version.distmon"
    path.write_bytes(msgpack.packb({"format": "distmon-recording", "version": "9" * 1_000_000, "created": 1.0}))
    done = distmon("report", str(path))
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert "is a version '999" in line and len(line) < 300 + len(str(path))


def test_a_report_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    path = tmp_path / "long.distmon"
    writer = RecordingWriter(str(path))
    for i in range(3000):
        writer.alert(1.7e9 + i, Change("raised", Alert("hang", "critical", [0], 1.7e9 + i, f"alert {i}", "d" * 50)))
    writer.close()
    done = subprocess.run(
        f"{sys.executable} -m distmon report {path} | head -1", shell=True, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.count("\n") == 1
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def test_a_folder_that_cannot_be_read_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hang_dumps(tmp_path)
    hidden = tmp_path / "rank3"
    hidden.mkdir()
    os.replace(tmp_path / "nccl_trace_rank_3", hidden / "nccl_trace_rank_3")
    if os.geteuid() == 0:  # root reads any folder: make this one refuse, as it would a user
        scandir = os.scandir

        def refusing(path: str) -> object:
            if os.fspath(path) == str(hidden):
                raise PermissionError(13, "Permission denied", str(hidden))
            return scandir(path)

        monkeypatch.setattr(os, "scandir", refusing)
    else:
        hidden.chmod(0)
    try:
        analysis = analyze([str(tmp_path)])
    finally:
        hidden.chmod(0o755)
    assert f"{hidden}: a folder that cannot be read (Permission denied): its files are left out" in analysis.problems


def test_a_world_smaller_than_the_files_is_said_and_the_files_win(tmp_path: Path) -> None:
    hang_dumps(tmp_path, world=8)
    done = distmon("analyze", "--world", "4", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "--world 4 is fewer ranks than the files hold: judged as 8 ranks" in done.stderr
    assert "8 ranks" in done.stdout and "never reported" not in done.stdout
    assert "CULPRIT rank 5" in done.stdout


def test_an_empty_dump_and_a_symlink_loop_are_named_for_what_they_are(tmp_path: Path) -> None:
    hang_dumps(tmp_path)
    (tmp_path / "nccl_trace_rank_6").write_bytes(b"")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    analysis = analyze([str(tmp_path), str(tmp_path / "loop")])
    assert f"{tmp_path / 'nccl_trace_rank_6'}: empty (0 bytes), no dump in it" in analysis.problems
    assert f"{tmp_path / 'loop'}: a symlink loop" in analysis.problems


def test_a_recording_cut_mid_record_says_where(tmp_path: Path) -> None:
    whole = tmp_path / "whole.distmon"
    small_recording(whole)
    cut = tmp_path / "cut.distmon"
    cut.write_bytes(whole.read_bytes()[:-40])
    done = distmon("report", str(cut))
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.splitlines()
    assert re.fullmatch(
        rf"distmon report: {re.escape(str(cut))} is cut at byte \d+, inside record \d+ \(by byte \d+\)", line
    )


@pytest.mark.parametrize("version", [1, 2])
def test_a_flipped_byte_skips_the_damaged_record_not_the_file(tmp_path: Path, version: int) -> None:
    path = tmp_path / "run.distmon"
    frames = [encode(Report("j", r % 4, 4, "h", 100 + r % 4, 1.7e9 + r, 0, 1.0)) for r in range(400)]
    flip = None
    if version == 1:
        records = [msgpack.packb(["m", 1.7e9 + i, f]) for i, f in enumerate(frames)]
        flip = len(HEADER) + sum(map(len, records[:200]))  # a record's first byte: a payload's is the frame's to find
        path.write_bytes(HEADER + b"".join(records))
    else:
        writer = RecordingWriter(str(path))
        for i, f in enumerate(frames):
            writer.message(1.7e9 + i, f)
        writer.close()
    content = bytearray(path.read_bytes())
    content[flip or len(content) // 2] ^= 0xFF
    path.write_bytes(bytes(content))
    done = distmon("report", str(path))
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.splitlines()
    assert f"{path} is damaged at record" in line
    if version == 1:
        pm = load_recording(str(path))
        assert pm.state.received >= 398 and "1 damaged record skipped, the rest read" in line


def test_replay_without_a_terminal_runs_headless_and_ends(tmp_path: Path) -> None:
    done = distmon("replay", str(DATA / "hang-rank2.distmon"), timeout=60)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout
    assert re.search(r"CRITICAL hang: .*rank 2", done.stdout), done.stdout


@pytest.mark.parametrize("command", ["report", "replay"])
def test_a_message_whose_report_cannot_be_decoded_is_no_traceback(tmp_path: Path, command: str) -> None:
    """A frame whose header reads but whose report does not (a damaged file's): counted as
    malformed, the rest played."""
    path = tmp_path / "undecodable.distmon"
    writer = RecordingWriter(str(path))
    writer.message(1.7e9, encode(Report("j", 0, 1, "HOSTX", 100, 1.7e9, 0, 1.0)).replace(b"HOSTX", b"HOST\xfc"))
    writer.close()
    done = distmon(*([command] if command == "report" else [command, "--headless"]), str(path))
    assert "Traceback" not in done.stderr, done.stderr
    if command == "report":
        assert done.returncode == 0 and "1 malformed" in done.stdout, done.stdout
    else:
        assert done.returncode == 0, done.stderr


def test_escapes_reach_the_terminal_ui_shown_not_obeyed() -> None:
    from distmon.tui.alert_detail import alert_evidence
    from distmon.tui.alerts_panel import describe
    from distmon.tui.cells import fit

    alert = Alert("hang", "critical", [0], 1.7e9, ESCAPES, ESCAPES + "\nsecond line")
    for shown in (describe(alert).plain, alert_evidence(alert).plain, fit(ESCAPES, 80)):
        assert "\x1b" not in shown and "\x07" not in shown and "\\x1b" in shown
