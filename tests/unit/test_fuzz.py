"""Fuzzing, in one place: every reader of what comes from elsewhere. Messages on the wire and
the monitor's intake, and the files a user hands us (issue 31): dump pickles and JSON, job
logs and recordings, mutated from valid ones or built nested and oversized. Whatever the
bytes, a reader returns or raises its own one-line error, never another exception, and each
file ends within :data:`LIMIT` seconds."""

from __future__ import annotations

import contextlib
import io
import json
import pickle
import tempfile
import time
from collections import Counter
from pathlib import Path

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distmon.export.plain import render
from distmon.flightrecorder.fields import group_ranks, read_dump
from distmon.flightrecorder.loading import MAX_DEPTH, DumpError, load_dump
from distmon.forensics.analysis import Analysis, analyze
from distmon.forensics.logs import read_log
from distmon.forensics.render import render_analysis as render_analysis
from distmon.monitor.pipeline import Monitor
from distmon.monitor.recording.readback import load_recording as load_recording
from distmon.monitor.recording.reader import RecordingError, read_recording
from distmon.monitor.recording.writer import RecordingWriter
from distmon.monitor.rules.detector import Detector
from distmon.monitor.state.alerts import Alert, Change
from distmon.node import looks as eye_looks
from distmon.node.looks import Looks, Taken
from distmon.node.proc import Sample
from distmon.node.pyspy import OutsideStack
from distmon.wire import Report, StackFrame, WireError, decode, encode
from distmon.wire.sockets import Batch
from tests.support.messages import bad_messages, full_report, report_map
from tests.support.nccl_dumps import Group, RankRecorder
from tests.support.pastes import PASTES
from tests.support.paths import DATA

LIMIT = 2.0
"""Seconds one fuzzed file may take to read, on a loaded 2-core machine."""
LOGS = DATA / "logs"
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def timed(read: object, *args: object) -> None:
    """``read(*args)`` within :data:`LIMIT` seconds of this process's CPU: the reader's own work,
    whatever else the machine runs (other test files share its cores)."""
    started = time.process_time()
    read(*args)  # type: ignore[operator]
    assert time.process_time() - started < LIMIT


def a_dump() -> dict[str, object]:
    r = RankRecorder(0)
    r.join(Group("0", "default_pg", [0, 1]))
    for _ in range(3):
        r.collective("0", "all_reduce")
    r.collective("0", "all_reduce", done=False)
    return r.dump()


PICKLE = pickle.dumps(a_dump(), protocol=2)
JSON = json.dumps(a_dump()).encode()

MUTATIONS = st.lists(
    st.tuples(st.sampled_from(["flip", "insert", "delete"]), st.floats(0, 1), st.binary(min_size=1, max_size=8)),
    min_size=1,
    max_size=6,
)


def mutated(raw: bytes, mutations: list[tuple[str, float, bytes]]) -> bytes:
    out = bytearray(raw)
    for how, where, data in mutations:
        at = min(int(where * len(out)), max(0, len(out) - 1))
        if how == "flip" and out:
            out[at] ^= data[0] or 1
        elif how == "insert":
            out[at:at] = data
        else:
            del out[at : at + len(data)]
    return bytes(out)


def read_a_dump(raw: bytes) -> None:
    try:
        read_dump(load_dump(raw), {})
    except DumpError as e:
        assert "\n" not in str(e)


@FUZZ
@given(MUTATIONS, st.sampled_from([PICKLE, JSON]))
def test_mutated_dumps_are_read_or_refused(mutations: list[tuple[str, float, bytes]], raw: bytes) -> None:
    timed(read_a_dump, mutated(raw, mutations))


STRUCTURE = st.sampled_from(
    [
        *(bytes([op]) for op in b"()]}\x85\x86\x87tldaesu012N\x94"),
        *(b"K\x01", b"\x8c\x01a", b"\x8a\x09" + b"\xff" * 9, b"G" + b"\x00" * 8, b"h\x00", b"q\x00"),
    ]
)


@FUZZ
@given(st.lists(STRUCTURE, max_size=300), st.integers(0, 3), st.integers(0, 200_000))
def test_built_pickles_nested_or_oversized_are_read_or_refused(program: list[bytes], wrap: int, depth: int) -> None:
    """Pickles written instruction by instruction: random structure, then a tuple, list or
    dict nested ``depth`` deep, or a list holding itself ``depth`` times."""
    nested = [
        b")" + b"\x85" * depth,
        b"(" * depth + b"K\x01" + b"l" * depth,
        b"(\x8c\x01a" * depth + b"N" + b"d" * depth,
        b"]\x94" + b"h\x00\x85a" * depth,
    ][wrap]
    raw = b"\x80\x02}\x8c\x09pg_status" + b"".join(program) + nested + b"s."
    timed(read_a_dump, raw)
    if depth > MAX_DEPTH and wrap != 3:
        with pytest.raises(DumpError):
            load_dump(raw)


@FUZZ
@given(st.integers(1, 100_000), st.sampled_from([b"[", b'{"a":', b"[{}, "]))
def test_deep_json_is_read_or_refused(depth: int, opening: bytes) -> None:
    timed(read_a_dump, b'{"version": "2.10", "entries": ' + opening * depth)


WATCHDOG = (
    "[rank{rank}]:[E1124 03:12:44.123456789 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank {rank}] "
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=4, "
    "NumelOut=4, Timeout(ms)=600000) ran for 600060 milliseconds before timing out."
)
LOG = "\n".join(
    [WATCHDOG.format(rank=r) for r in range(4)]
    + ["[rank2]:Traceback (most recent call last):", '[rank2]:  File "train.py", line 3, in <module>', "x"]
)


def read_a_log(text: str) -> None:
    read_log(io.StringIO(text))


@FUZZ
@given(MUTATIONS)
def test_mutated_logs_are_read(mutations: list[tuple[str, float, bytes]]) -> None:
    timed(read_a_log, mutated(LOG.encode(), mutations).decode("utf-8", "replace"))


PREFIXES = [WATCHDOG.format(rank=1)[:n] for n in (8, 60, 100, 150, 200)] + [
    "WorkNCCL(",
    "Timeout at NCCL work: ",
    # the job's own accounts: torch's reports, the launchers, Horovod, NCCL, the transports
    "- [0] Timeout at collective: ALLREDUCE, #1 [0, 1, ",
    "  [0, 1] joined but didn't finish collective #",
    "Detected mismatch between collectives on ranks. Rank 1 is running collective: CollectiveFingerPrint(",
    ", but Rank 2 is running collective: CollectiveFingerPrint(OpType=",
    "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks x [ready ranks: 1, ",
    "t [missing ranks: 0, ",
    "srun: error: n1: tasks 1-3,",
    "mpirun noticed that process rank 1 with PID 1 on node ",
    "  rank      : 1 (local_rank: 1)",
    "Received a dump signal due to a collective timeout from  rank 3 ",
    "n1:1:1 [0] NCCL INFO comm 0x1 rank 1 nranks ",
    "Duplicate GPU detected : rank 1 and rank ",
    "Connection closed by remote peer n1",
    "Got completion from peer 10.0.0.1<1> with status=",
    "[1,2]<stderr>:",
    # the store, Ray, a progress bar, torchrun's agent signalled, a table retyped
    "Waiting in store based barrier to initialize process group for rank: 1, key: k (world_size=",
    "[c10d] The client socket has timed out after 1s while trying to connect to (",
    "[1] is setting up NCCL communicator and retrieving ncclUniqueId from [",
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n\tname: w_0:",
    " 47%|####  | 47/100 [",
    "Received 1 death signal, shutting down workers",
    "rank3 (local rank: 3)exitcode: ",
    "['python', '--local_rank=0', 'x'] exits with return code = ",
    # native crashes, shared memory, Ray's workers, a subprocess, the copy's labels
    "[n1:1 :0:1] Caught signal 7 (Bus error: ",
    "*** SIGABRT received at time=1 ***\n    @ 0x1  (unknown)  gloo::",
    " 0 0x0000000000012345 ncclShmOpen()  ???:0 ",
    "Fatal Python error: Segmentation fault\n",
    "[/x/gloo/gloo/transport/uv/libuv.h:596] uv_accept: ",
    "[gloo/gloo/",
    "insufficient shared memory (shm) /dev/shm/nccl-",
    "A worker died or was killed while executing a task Worker PID: 1 The process receives a SIGTERM. ",
    "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.\n\tname: w_0:",
    "subprocess.CalledProcessError: Command '['python', '--local_rank=0'] returned non-zero exit status ",
    'Root Cause:\n[0]:\n  rank: 1 (local_rank: 1)\n  msg: "Signal 9 (SIGKILL) ',
    "trying to initialize the default process group twice! environment variable RANK expected, but not set",
    "The server socket has failed to listen on any local network address. Address already in use ",
    "[0] [1] [2] ",
    "E       E   ",
    "``` ```",
    "worker-3: [rank: 1] [rank1] [RANK 1] rank1: ",
    "May 01 12:00:01 node1 python3[4321]: [pod/a/b] (pid=1, ip=1.2.3.4) (raylet) ",
    "[2024-05-01 12:00:01,234][name][ERROR] - 2024-05-01 12:00:01.234 | ERROR    | a:b:1 - ",
    " [repeated 3x across cluster]",
    "NCCL WARN socketStartConnect: Connect to 10.0.0.1<1> failed : ",
    "2: [Rank 2] 3: [Rank 3] [1,mpirank:3,algo-1]<stderr>:",
    "- (node_id=n, ip=1.2.3.4, pid=5) world_rank=1, local_rank=",
    "=   RANK 1 PID 1 RUNNING AT n1\n=   KILLED BY SIGNAL: ",
    "The first process to do so was:\n  Process name: [prterun-n-1@1,",
    "Process 1 exit with status code ",
    "*** JOB 1 ON n1 CANCELLED AT 2024-05-01T12:00:00 DUE TO ",
    # round 62's families: mpirun's other words, Hydra's, DeepSpeed's kills, Lightning's, spawn's heading,
    # XLA's mesh, NCCL's adapter, the store lost, Ray's memory monitor, teardown, Horovod's wrapped list
    'mpirun has exited due to process rank 1 with PID 1 on node n1 calling "abort" ',
    "prterun noticed that process rank 1 with PID 1 on node n1 exited on ",
    "Primary job  terminated normally, but 1 process returned ",
    "=   PID 1 RUNNING AT n1\n=   EXIT CODE: ",
    "[INFO] [launch.py:1:sigkill_handler] Killing subprocess 1",
    "Main process received SIGINT, exiting ",
    "[rank: 1] Child process with PID 1 terminated with code ",
    "-- Process 1 terminated with the following error:",
    "Failed to connect to client mesh master: ",
    "n1:1:1 [0] NCCL WARN NET/IB : mlx5_0:1 async fatal event on QP (0x1) qpn=1 ",
    "NCCL WARN NET/IB : Got completion with error ",
    "recvValue failed on SocketImpl(fd=1, addr=[a]:1, remote=[",
    "Task was killed due to the node running low on memory. (name=w, pid=",
    "Stalled ranks:\n0: [a, ",
    "main process destroyed cuda before watchdog loop exited ",
    "[----------] Global test environment tear-down ",
    # the general readings: the launchers' words as data, a shell's signal, every process alike, the
    # environment's refusals, NCCL's failed calls, a collector's columns, Open MPI's fragments
    "Out of all 4 trainers, the trainer process with rank=[0, ",
    "Container rank 1 status failed cmd ['x', 'y'] code ",
    "(TorchTrainer pid=1) Worker 1 has failed. ",
    "application called MPI_Abort(MPI_COMM_WORLD, 1) - process ",
    "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD ",
    "Abort(1) on node 1 (rank 1 in comm 0): ",
    "OOMKilled command terminated with exit code ExecuteUserScriptError: ExitCode ",
    "pdsh@h: n: ssh exited with exit code ",
    "bash: line 1: 42 Killed ",
    "terminate called after throwing an instance of 'std::x'\n  what():  ",
    "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 1/",
    "slurmstepd: error: Detected 1 oom-kill event(s) in step 1.0 srun: Terminating StepId=1.0 ",
    "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout ",
    "Name or service not known peer access is not supported cannot open shared object file was preempted node ",
    "n1:1:1 [0] NCCL INFO transport/net.cc:1 -> ",
    "#  Rank  0 Group  0 Pid  1 on  n1 device  ",
    "The client socket has failed to connect to any network address of (",
    "NCCL WARN socketPollConnect: connect returned ",
    "<info>    [2024-05-01 12:00:01] 0a1b || master.0 -- 10.0.0.1 [1] ",
    "[1,0]<stderr>:[[1,0]<stderr>:",
    "Evaluating on rank=1:  47%|####  | 47/100 [",
    # a log exported as JSON, an entry a line or printed across lines
    '{"log": "[rank1]: Traceback (most recent call last):\\n", "stream": "stderr", "time": "',
    '{"jsonPayload": {"message": "[rank0]: ',
    '    "textPayload": "[rank1]: \\u0000\\"',
]


@settings(max_examples=20, deadline=None)
@given(st.integers(1_000, 64 * 1024), st.sampled_from(PREFIXES))
def test_long_lines_repeating_a_prefix_are_read_in_time(length: int, prefix: str) -> None:
    timed(read_a_log, (prefix * (length // len(prefix)) + "\n") * 3)


@pytest.mark.parametrize("prefix", PREFIXES)
def test_the_longest_line_repeating_each_prefix_is_read_in_time(prefix: str) -> None:
    timed(read_a_log, (prefix * (64 * 1024 // len(prefix)) + "\n") * 3)


def a_recording(path: Path) -> bytes:
    writer = RecordingWriter(str(path))
    frames = [encode(Report("j", r, 4, "h", 100 + r, 1.7e9, 0, 1.0)) for r in range(4)]
    for i, frame in enumerate(frames):
        writer.message(1.7e9 + i, frame)
    writer.batch(1.7e9 + 5, Batch.of(frames))
    writer.alert(1.7e9 + 6, Change("raised", Alert("hang", "critical", [2], 1.7e9 + 6, "stuck", "evidence")))
    writer.dropped(1.7e9 + 7, Counter({"malformed": 2}))
    writer.close()
    return path.read_bytes()


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return a_recording(tmp_path_factory.mktemp("fuzz") / "valid.distmon")


def read_a_recording(path: str) -> None:
    try:
        _, records = read_recording(path)
        sum(1 for _ in records)
        records.trouble()
        render(load_recording(path))
    except RecordingError as e:
        assert "\n" not in str(e)


@FUZZ
@given(MUTATIONS)
def test_mutated_recordings_are_read_or_refused(
    recording: bytes, tmp_path_factory: pytest.TempPathFactory, mutations: list[tuple[str, float, bytes]]
) -> None:
    path = tmp_path_factory.mktemp("mutated") / "r.distmon"
    path.write_bytes(mutated(recording, mutations))
    timed(read_a_recording, str(path))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MUTATIONS, st.integers(0, 3))
def test_a_set_of_mutated_dumps_is_analysed(
    tmp_path_factory: pytest.TempPathFactory, mutations: list[tuple[str, float, bytes]], which: int
) -> None:
    folder = tmp_path_factory.mktemp("dumps")
    for rank in range(4):
        raw = [PICKLE, JSON][rank % 2]
        (folder / f"nccl_trace_rank_{rank}").write_bytes(mutated(raw, mutations) if rank == which else raw)
    timed(analyze, [str(folder)])


# --- the wire ---------------------------------------------------------------------------


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
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(sorted(report_map(full_report()))), inner, max_size=6)
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
    message = report_map(full_report())
    key = data.draw(st.sampled_from(sorted(message)))
    message[key] = data.draw(msgpack_values)
    decodes_or_refuses(msgpack.packb(message))


# --- the monitor's intake -------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=2048) | st.sampled_from(bad_messages()), max_size=20))
def test_the_monitor_pipeline_drops_and_counts_any_bytes(messages: list[bytes]) -> None:
    monitor = Monitor(Detector())
    for raw in messages:
        monitor.ingest(raw, 1.0)
    monitor.tick(2.0)
    assert sum(monitor.state.dropped.values()) + monitor.state.received == len(messages)


# --- Flight Recorder dumps, field by field -------------------------------------------


ENTRY_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=30),
    st.sampled_from(["nccl:send 0->1", "nccl:recv 1<-0", "nccl:coalesced", "nccl:all_reduce", "completed"]),
    st.lists(st.integers(), max_size=3),
    st.tuples(st.text(max_size=4), st.text(max_size=4)),
)
FIELDS = st.sampled_from(
    [
        "pg_id",
        "process_group",
        "collective_seq_id",
        "p2p_seq_id",
        "profiling_name",
        "time_created_ns",
        "state",
        "retired",
        "is_p2p",
        "timeout_ms",
        "input_sizes",
        "time_discovered_completed_ns",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    entries=st.lists(st.dictionaries(FIELDS, ENTRY_VALUES, max_size=12), max_size=8),
    status=st.dictionaries(st.text(max_size=3), st.dictionaries(st.text(max_size=30), ENTRY_VALUES), max_size=3),
    ranks=st.one_of(st.text(max_size=20), st.lists(st.integers(), max_size=5), st.none()),
)
def test_fuzzed_dumps_read_or_refuse_never_raise_otherwise(entries: list, status: dict, ranks: object) -> None:
    dump = {"version": "2.10", "entries": entries, "pg_status": status, "pg_config": {"0": {"ranks": ranks}}}
    for raw in (pickle.dumps(dump, protocol=2), json.dumps(dump, default=str).encode()):
        try:
            loaded = load_dump(raw)
        except DumpError:
            continue
        members = {"0": group_ranks(loaded["pg_config"].get("0")) or []}
        read_dump(loaded, members)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(min_value=0, max_value=400))
def test_fuzzed_bytes_and_cut_dumps_are_refused_in_one_line(noise: bytes, cut: int) -> None:
    real = RankRecorder(0)
    real.join(Group("0", "default_pg", [0, 1]))
    real.collective("0", "all_reduce", done=False)
    for raw in (noise, b"\x80\x02" + noise, real.pickle()[:cut], real.json()[:cut]):
        try:
            read_dump(load_dump(raw), {})
        except DumpError as e:
            assert "\n" not in str(e)


# --- job logs, line by line ------------------------------------------------------------


FIXTURE_FILES = sorted([*LOGS.rglob("*.log"), *LOGS.rglob("pyspy_*.txt")])
FIXTURE_LINES = sorted({line for path in FIXTURE_FILES for line in path.read_text().splitlines()})
CONTROL = {chr(c) for c in range(32) if chr(c) != "\n"} | {"\x7f", "\x9b", "\u202e"}


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(FIXTURE_LINES),
            st.tuples(st.sampled_from(FIXTURE_LINES), st.integers(0, 400)).map(lambda cut: cut[0][: cut[1]]),
            st.tuples(st.sampled_from(FIXTURE_LINES), st.integers(0, 400)).map(lambda cut: cut[0][cut[1] :]),
            st.tuples(st.sampled_from(FIXTURE_LINES), st.integers(0, 400), st.sampled_from(sorted(CONTROL))).map(
                lambda put: put[0][: put[1]] + put[2] + put[0][put[1] :]
            ),
            st.text(alphabet=st.sampled_from(sorted(CONTROL) + list("[]:()=, 0123456789abkrPGI")), max_size=80),
        ),
        max_size=40,
    )
)
def test_cut_and_shuffled_fixture_lines_are_read_without_raising(lines: list[str]) -> None:
    facts = read_log(io.StringIO("\n".join(lines)))
    assert all(rank >= 0 for rank in facts.timeouts) and all(rank >= 0 for rank in facts.raised)
    analysis = _analyze_text("\n".join(lines))
    printed = render_analysis(analysis)
    assert not CONTROL & set(printed) - {"\n"}


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=200),
            st.sampled_from(FIXTURE_LINES).map(lambda line: line[: len(line) // 2]),
            st.builds(
                "[rank{}]:[E{} ...] [PG ID {} PG GUID {}({}) Rank {}] Watchdog caught collective operation timeout: "
                "WorkNCCL(SeqNum={}, OpType={}, ...) ran for {} milliseconds".format,
                st.one_of(st.integers(-5, 64), st.integers(10**6, 10**12)),  # a world of 131,072 takes seconds
                st.text(max_size=12),
                st.integers(0, 99),
                st.text(max_size=6),
                st.text(max_size=20),
                st.integers(0, 10**12),
                st.integers(0, 10**30),
                st.text(max_size=12),
                st.integers(0, 10**30),
            ),
        ),
        max_size=20,
    )
)
def test_fuzzed_logs_are_read_without_raising(lines: list[str]) -> None:
    facts = read_log(io.StringIO("\n".join(lines)))
    for rank, timeouts in facts.timeouts.items():
        assert rank >= 0 and all(t.group for t in timeouts.values())
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "job.log").write_text("\n".join(lines), errors="surrogatepass")
        render_analysis(analyze([folder]))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(FIXTURE_LINES), max_size=30),
    st.lists(st.sampled_from(sorted(PASTES)), min_size=1, max_size=3),
)
def test_lines_pasted_any_ways_are_read_in_time_and_shown_not_obeyed(lines: list[str], pastes: list[str]) -> None:
    text = "\n".join(lines)
    for paste in pastes:
        text = PASTES[paste](text)
    timed(read_a_log, text)
    printed = render_analysis(_analyze_text(text))
    assert not CONTROL & set(printed) - {"\n"}


def _analyze_text(text: str) -> Analysis:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "job.log").write_text(text, errors="surrogatepass")
        return analyze([folder])


# --- what the nodes' eyes saw -------------------------------------------------------------


def looks_or_refusal(data: bytes) -> None:
    """Looks or a :class:`WireError`: anything else escaping ``decode`` fails the test."""
    with contextlib.suppress(WireError):
        assert isinstance(eye_looks.decode_looks(data), list)


@given(st.data())
def test_corrupted_looks_raise_only_wire_errors(data):
    sample = Sample(42, 100.0, "S", wchan="hrtimer_nanosleep", syscall="clock_nanosleep", cpu=1.0)
    stack = OutsideStack(frames=[StackFrame("train.py", 1, "step")], error="x")
    message = bytearray(eye_looks.encode_looks([Looks("node-b", [sample, sample], [Taken(42, 1.0, stack)])]))
    for _ in range(data.draw(st.integers(1, 8))):
        message[data.draw(st.integers(0, len(message) - 1))] = data.draw(st.integers(0, 255))
    looks_or_refusal(bytes(message))


@given(msgpack_values)
def test_random_structures_are_no_looks(value):
    looks_or_refusal(msgpack.packb([{"host": "b", "fields": ["pid", "t", "state"], "samples": [value], "stacks": []}]))
    looks_or_refusal(msgpack.packb(value))
