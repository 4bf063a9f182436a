"""Each format ``distmon analyze`` reads in a job's log, a test per format module of
``distmon/forensics`` (the real pastes are in ``test_real_logs.py``): lines written as the code
that prints them writes them (ProcessGroupNCCL.cpp and TraceUtils.h, ProcessGroupWrapper.cpp,
torch elastic's error table, Open MPI's and srun's messages, Horovod's stall inspector, NCCL),
each test saying what the format proves and what it does not."""

from __future__ import annotations

import io
import tempfile
import time
from pathlib import Path

import pytest

from distmon.flightrecorder.fields import op_family
from distmon.forensics import crashes, distributed_debug, horovod, launcher_lines, ray_actors
from distmon.forensics.analysis import Analysis, analyze
from distmon.forensics.blame import assign_blame
from distmon.forensics.crashes import Crashes
from distmon.forensics.desync import MAX_REPORTS, DesyncLines
from distmon.forensics.distributed_debug import DebugChecks, Fingerprint
from distmon.forensics.failures import Failure, whom
from distmon.forensics.horovod import HorovodStalls
from distmon.forensics.launcher_lines import task_list
from distmon.forensics.logs import read_log
from distmon.forensics.nccl import NcclLines
from distmon.forensics.pasted import lines_as_written, unlabelled
from distmon.forensics.peers import CLOSED, FABRIC, PeerLines
from distmon.forensics.ray_actors import RayActors
from distmon.forensics.signal_handler import SignalHandler
from distmon.forensics.stores import MAX_WAITS, StoreLines
from distmon.forensics.watchdog import watchdog_said
from distmon.forensics.worker_exits import LOCAL_RANK, MAX_TASKS, PROCESS, RANK, SPAWNED, TASK, WORKER
from distmon.wire import StackFrame
from tests.support.real_logs import read_launcher
from tests.support.verdicts import alone


def analyze_text(text: str) -> Analysis:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "job.log").write_text(text)
        return analyze([folder])


# --- launchers ---------------------------------------------------------------------------

TABLE = """\
Failures:
[1]:
  time      : 2024-03-01_10:00:07
  host      : node-1
  rank      : 1 (local_rank: 1)
  exitcode  : -15 (pid: 101)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 101
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-03-01_10:00:05
  host      : node-1
  rank      : 2 (local_rank: 2)
  exitcode  : -9 (pid: 102)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 102
============================================================"""


def test_torchruns_table_gives_every_entry_and_its_root_cause() -> None:
    exits = read_launcher(TABLE)
    assert [(e.unit, e.who, e.code, e.first, e.signal) for e in exits] == [
        (RANK, 1, -15, False, "SIGTERM"),
        (RANK, 2, -9, True, "SIGKILL"),
    ]
    assert exits[1].killed and not exits[0].killed, "torchrun's own SIGTERM is its teardown"
    verdict = assign_blame(analyze_text(TABLE))
    assert alone(verdict) == [2] and "Signal 9 (SIGKILL)" in verdict.headline, "rank 1 torn down: alive, no more"


def test_torchruns_agent_line_names_a_local_rank_only() -> None:
    line = "E0325 20:57:27.620000 2606 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) "
    [exit_] = read_launcher(line + "local_rank: 5 (pid: 2630) of binary: /usr/bin/python3")
    assert (exit_.unit, exit_.who, exit_.code) == (LOCAL_RANK, 5, -9)


def test_mpirun_names_the_rank_killed_and_the_first_to_exit() -> None:
    text = """\
mpirun noticed that process rank 3 with PID 0 on node n7 exited on signal 9 (Killed).
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[29973,1],5]
  Exit code:    1"""
    assert [(e.who, e.code, e.host) for e in read_launcher(text)] == [(3, -9, "n7"), (5, 1, None)]


def test_open_mpis_signal_handler_names_processes_not_ranks() -> None:
    exits = read_launcher(
        "[gpu-2:04711] *** Process received signal ***\n[gpu-2:04711] Signal: Segmentation fault (11)"
    )
    assert [(e.unit, e.who, e.code, e.host) for e in exits] == [(PROCESS, 4711, -11, "gpu-2")]


def test_open_mpis_signal_handler_is_read_indented_as_a_paste_keeps_it() -> None:
    """A paste indented as a block keeps its indent where a terminal's wrap or a stamp ends the block."""
    exits = read_launcher("    [gpu-2:04711] Signal: Segmentation fault (11)\n    [gpu-2:04711] Signal code:  (128)")
    assert [(e.unit, e.who, e.code) for e in exits] == [(PROCESS, 4711, -11)]


def test_sruns_tasks_are_named_as_tasks() -> None:
    exits = read_launcher(
        "srun: error: node-3: tasks 8-10,12: Exited with exit code 1\nsrun: error: node-4: task 3: Killed"
    )
    assert [(e.unit, e.who, e.code) for e in exits] == [
        (TASK, 8, 1),
        (TASK, 9, 1),
        (TASK, 10, 1),
        (TASK, 12, 1),
        (TASK, 3, -9),
    ]
    assert task_list("4-2,x,7") == [7]


def test_mp_spawns_join_names_the_process_it_found_ended_the_rank_on_one_node() -> None:
    exits = read_launcher(
        "torch.multiprocessing.spawn.ProcessExitedException: process 2 terminated with signal SIGKILL\n"
        "Exception: process 3 terminated with exit code 1"
    )
    assert [(e.unit, e.who, e.code, e.first) for e in exits] == [(SPAWNED, 2, -9, True), (SPAWNED, 3, 1, True)]
    verdict = assign_blame(
        analyze_text("Traceback (most recent call last):\n" + "Exception: process 1 terminated with signal SIGKILL")
    )
    assert verdict.culprits == [] and [s.rank for s in verdict.suspects] == [1], "its index, not proven its rank"
    assert "process 1 ended by signal 9 (SIGKILL)" in verdict.suspects[0].why


def test_the_deepspeed_launchers_return_code_names_no_worker() -> None:
    line = (
        "[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ['/usr/bin/python3', '-u', 'main.py', "
        "'--local_rank=7'] exits with return code = -9"
    )
    [exit_] = read_launcher(line)
    assert (exit_.unit, exit_.code) == (WORKER, -9), "the command it prints is the last it built, not the failed one's"
    verdict = assign_blame(analyze_text(line))
    assert verdict.culprits == [] and verdict.suspects == [] and "not which" in verdict.headline


def test_exit_code_2_is_pythons_usage_error_the_launchs_not_a_ranks() -> None:
    one = TABLE.split("Root Cause")[0].replace("-15 (pid: 101)", "2 (pid: 101)").replace("Signal 15 (SIGTERM)", "x")
    verdict = assign_blame(analyze_text(one))
    assert verdict.nobody is not None and "exit code 2 is Python's usage error" in verdict.nobody
    verdict = assign_blame(analyze_text(one.replace("exitcode  : 2", "exitcode  : 1")))
    assert verdict.nobody is None, "another exit code of one rank's is no usage error"


def test_every_rank_failing_alike_at_once_blames_nobody_but_one_failing_first_is_the_cause() -> None:
    alike = TABLE.replace("-15 (pid: 101)", "1 (pid: 101)").replace("-9 (pid: 102)", "1 (pid: 102)")
    verdict = assign_blame(analyze_text(alike.replace("10:00:07", "10:00:05")))
    assert (
        verdict.culprits == [] and verdict.nobody is not None and "failed alike at once (exit code 1)" in verdict.nobody
    )
    verdict = assign_blame(analyze_text(alike.replace("10:00:07", "10:09:07")))
    assert verdict.culprits == [2], "nine minutes apart, the first failure is the cause"


def test_a_rank_whose_exception_was_anothers_consequence_is_not_counted_failing_alike_by_its_exit() -> None:
    table = (
        TABLE.replace("-15 (pid: 101)", "1 (pid: 101)")
        .replace("-9 (pid: 102)", "1 (pid: 102)")
        .replace("rank      : 2 (local_rank: 2)", "rank      : 0 (local_rank: 0)")
        .replace("10:00:07", "10:00:05")
    )
    log = (
        "[rank0]: Traceback (most recent call last):\n[rank0]: ValueError: expected sequence of length 512\n"
        "[rank1]: Traceback (most recent call last):\n[rank1]: RuntimeError: "
        "[../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.0.0.2]:14004\n"
    )
    verdict = assign_blame(analyze_text(log + table))
    assert verdict.nobody is None and verdict.culprits == [0], "rank 1's exit 1 is rank 0's failure's consequence"


def test_open_mpis_signal_handler_and_mpirun_naming_one_segfaulting_worker_are_one_failure() -> None:
    text = (
        "[gpu-2:04711] *** Process received signal ***\n[gpu-2:04711] Signal: Segmentation fault (11)\n"
        "mpirun noticed that process rank 3 with PID 4711 on node gpu-2 exited on signal 11 (Segmentation fault).\n"
    )
    verdict = assign_blame(analyze_text(text))
    assert verdict.nobody is None and alone(verdict) == [3], "the process is rank 3, by pid and by rank: alone"
    assert whom([Failure("rank 0"), Failure("process 12")]) == "rank 0 and 1 process"
    assert whom([Failure("process 11"), Failure("process 12")]) == "2 processes"


def handler_backtrace(rank: int, pid: int, *frames: str, first: int = 0) -> str:
    """Open MPI's handler's backtrace of ``rank`` under mpirun's ``--tag-output`` from its frame
    ``first``, its lines naming the signal cut (an excerpt)."""
    lines = [f"[1,{rank}]<stderr>:[n1:{pid}] [{i:2d}] {frame}" for i, frame in enumerate(frames, first)]
    return "\n".join([*lines, f"[1,{rank}]<stderr>:[n1:{pid}] *** End of error message ***"]) + "\n"


MPIRUN_SEGV = "mpirun noticed that process rank 2 with PID 0 on node n1 exited on signal 11 (Segmentation fault).\n"


def test_ranks_whose_handlers_show_a_crash_beside_mpiruns_one_segfault_failed_alike() -> None:
    """mpirun names the first process it saw end; other ranks' handlers, their signal lines cut,
    show crashes of their own (no abort in their first frames): every one crashed alike."""
    segv = (
        "/lib/libpthread.so.0(+0x10330)[0x7f01]",
        "python(PyObject_IsTrue+0x39)[0x5501]",
        "python(+0x1604fb)[0x5502]",
    )
    text = handler_backtrace(0, 301, *segv) + handler_backtrace(3, 304, *segv) + MPIRUN_SEGV
    verdict = assign_blame(analyze_text(text))
    assert verdict.culprits == [] and verdict.nobody is not None
    assert verdict.nobody.startswith("ranks 0, 2-3 failed alike (signal 11 (SIGSEGV))")


def test_a_handlers_backtrace_of_an_abort_or_cut_at_its_head_proves_no_crash_alike() -> None:
    """An abort (a watchdog's, after another's failure) or a backtrace whose first frames are cut
    says nothing of a crash of the rank's own: mpirun's rank stays the one that failed."""
    abort = ("/lib/libpthread.so.0(+0xf6d0)[0x7f01]", "/lib/libc.so.6(gsignal+0x37)[0x7f02]", "libc.so.6(abort)[0x3]")
    cut = handler_backtrace(3, 304, "python(+0x1)[0x1]", "python(+0x2)[0x2]", "python(+0x3)[0x3]", first=5)
    text = handler_backtrace(0, 301, *abort) + cut + MPIRUN_SEGV
    verdict = assign_blame(analyze_text(text))
    assert verdict.nobody is None and verdict.culprits == [2]


def test_a_handlers_report_cut_to_its_head_or_tail_shows_no_rank_going_on_beside_mpiruns_one() -> None:
    """Rank 3's report is all the excerpt keeps of it (its closing line, or its frames from the fifth): it ended by a
    signal too, how the paste cut, so it is no witness that rank 2 failed apart: rank 2 is suspected, not proven."""
    tail = "[1,3]<stderr>:[n1:304] *** End of error message ***\n"
    cut = handler_backtrace(3, 304, "python(+0x1)[0x1]", "python(+0x2)[0x2]", "python(+0x3)[0x3]", first=5)
    for report in (tail, cut):
        verdict = assign_blame(analyze_text(report + MPIRUN_SEGV))
        assert verdict.culprits == [] and [s.rank for s in verdict.suspects][:1] == [2] and verdict.alone
    going_on = "[1,3]<stdout>:epoch 4 step 120 loss 0.31\n"
    assert assign_blame(analyze_text(going_on + MPIRUN_SEGV)).culprits == [2], "rank 3 went on: rank 2 failed apart"


def test_the_signal_handlers_reader_keeps_a_bounded_account_of_the_ranks_it_read() -> None:
    handler = SignalHandler(lambda exit: None)
    for rank in range(MAX_TASKS + 10):
        handler.line(f"[n1:{rank}] Signal: Segmentation fault (11)", rank)
        handler.line(f"[n1:{rank}] [ 0] python(+0x1)[0x1]", rank + MAX_TASKS)
    assert len(handler.crashed) <= MAX_TASKS and len(handler.backtraces) <= MAX_TASKS


# --- the desync report ----------------------------------------------------------------------


def desync(*lines: str, rank: int | None = None) -> DesyncLines:
    reader = DesyncLines()
    for line in lines:
        reader.line(line, rank)
    return reader


def test_the_desync_report_names_the_rank_that_never_started_the_next_collective() -> None:
    [report] = desync(
        "\t - [0] Timeout at collective: ALLREDUCE, #12",
        "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
        "\t     [3] finished collective #11, but didn't join collective #12 (count from 1)",
        "\t - Snapshot of ranks' latest states:",
        "\t   #11 finished ranks:",
        "\t     [3] finished ALLREDUCE",
        "\t   #12 started ranks:",
        "\t     [0, 1, 2] started ALLREDUCE",
    ).reports
    culprits = report.culprits()
    assert culprits is not None and culprits[0] == [3] and report.of_world


def test_the_desync_report_names_ranks_that_never_joined_and_one_that_ran_another_op() -> None:
    [missing] = desync(
        "- [1] Timeout at collective: BROADCAST, #1",
        "- To our best knowledge, ranks [2, 3] are the lagging ranks that caused this timeout. They never joined "
        "any collectives",
    ).reports
    assert missing.culprits() == ([2, 3], "never joined a collective (torch's desync report)")
    [other] = desync(
        "- [0] Timeout at collective: ALLREDUCE, #7",
        "- To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:",
        "  - [0, 1, 2, 3] joined but didn't finish collective #7 (count from 1)",
        "- Snapshot of ranks' latest states:",
        "  #7 started ranks:",
        "    [0, 1, 3] started ALLREDUCE",
        "    [2] started BROADCAST",
    ).reports
    said = other.culprits()
    assert said is not None and said[0] == [2] and "started BROADCAST" in said[1]


def test_a_desync_report_where_every_rank_joined_one_collective_blames_nobody() -> None:
    text = (
        "[rank0]:[E1124 03:12:44.1 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds"
        " before timing out.\\n\\t - [0] Timeout at collective: ALLREDUCE, #7\\n\\t - To our best knowledge, the "
        "lagging/dead/mismatched ranks that caused the desync are:\\n\\t   - [0, 1] joined but didn't finish "
        "collective #7 (count from 1)\\n\\t - Snapshot of ranks' latest states:\\n\\t   #7 started ranks:"
        "\\n\\t     [0, 1] started ALLREDUCE"
    )
    verdict = assign_blame(analyze_text(text))
    assert verdict.culprits == [] and verdict.nobody is not None and "every rank joined collective #7" in verdict.nobody


def test_a_desync_report_cut_anywhere_is_read_without_failing() -> None:
    """A paste that ends after the snapshot's number, before the ranks under it, is still read."""
    report = (
        "[rank6]:[E1115 16:42:37.768057301 ProcessGroupNCCL.cpp:1936] Rank 6\n"
        "\t - [6] Timeout at collective: ALLREDUCE, #730\n"
        "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:\n"
        "\t   - [0, 1, 2, 3] joined but didn't finish collective #730 (count from 1)\n"
        "\t - Snapshot of ranks' latest states:\n"
        "\t   #730 started ranks:\n"
        "\t     [0, 1, 2, 3] started ALLREDUCE\n"
    )
    lines = report.splitlines(keepends=True)
    for end in range(1, len(lines) + 1):
        assign_blame(analyze_text("".join(lines[:end])))


def test_a_subgroups_desync_report_is_not_read_as_global_ranks() -> None:
    [report] = desync("- [1] Timeout at collective: ALLREDUCE, #3", rank=5).reports
    assert not report.of_world, "the group's rank 1 printed on global rank 5"


# --- TORCH_DISTRIBUTED_DEBUG: the fingerprint check and the monitored barrier ---------------

FINGERPRINT = (
    "RuntimeError: Detected mismatch between collectives on ranks. Rank {a} is running collective: "
    "CollectiveFingerPrint(SequenceNumber=9, OpType=ALLREDUCE, TensorShape=[4], TensorDtypes=Float, "
    "TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default))), but Rank {b} "
    "is running collective: CollectiveFingerPrint(SequenceNumber=9, OpType=BROADCAST, TensorShape=[1])."
)


def test_the_fingerprint_check_proves_the_odd_rank_where_others_agree() -> None:
    checks = DebugChecks()
    assert checks.line(FINGERPRINT.format(a=1, b=3))
    odd = checks.odd()
    assert odd is not None and odd[0] == [3] and "BROADCAST #9" in odd[1], "ranks 0-2 ran rank 1's ALLREDUCE"


def test_two_ranks_that_disagree_leave_the_odd_one_open() -> None:
    checks = DebugChecks()
    checks.line(FINGERPRINT.format(a=1, b=0))
    assert checks.odd() is None and checks.disagreeing() == [0, 1]


def test_a_ranks_own_message_overrules_what_the_check_received_of_it() -> None:
    """Rank 1 issued an extra barrier: the check's exchange falls out of step, so each message reports garbage
    of the rank it names (``SequenceNumber=0``); each rank's own message says what it ran."""
    garbled = "CollectiveFingerPrint(SequenceNumber=0OpType={op})."
    checks = DebugChecks()
    for rank in (2, 3, 0):
        checks.line(
            FINGERPRINT.format(a=rank, b=1).split(", but Rank 1")[0]
            + ", but Rank 1 is running collective: "
            + garbled.format(op="REDUCE")
        )
    checks.line(
        "RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=9OpType=BARRIER), but Rank 0 is running collective: "
        + garbled.format(op="SCATTER")
    )
    odd = checks.odd()
    assert odd is not None and odd[0] == [1] and "BARRIER #9 where 3 ranks ran ALLREDUCE #9" in odd[1]


def test_the_reporting_rank_raised_no_fault_of_its_own() -> None:
    log = f"[rank1]: Traceback (most recent call last):\n[rank1]: {FINGERPRINT.format(a=1, b=3)}"
    facts = read_log(io.StringIO(log))
    assert facts.raised[1].consequence
    assert assign_blame(analyze_text(log)).culprits == [3]


def test_a_rank_at_the_monitored_barrier_names_rank_0_as_never_answering() -> None:
    checks = DebugChecks()
    checks.line(
        "RuntimeError: Rank 2 successfully reached monitoredBarrier, but received errors while waiting for "
        "send/recv from rank 0. Please check rank 0 logs for faulty rank."
    )
    assert list(checks.unanswering()) == [0]


# --- Horovod's stall inspector ----------------------------------------------------------------


def test_horovods_three_stall_shapes_name_the_missing_ranks() -> None:
    newest = HorovodStalls()
    for line in [
        "[2021-02-02 21:19:07.345988: W horovod/common/stall_inspector.cc:105] One or more tensors were submitted "
        "to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more "
        "than 60 seconds. This may indicate that different ranks are trying to submit different tensors or that "
        "only subset of ranks is submitting tensors, which will cause deadlock. ",
        "Missing ranks:",
        "2: [DistributedSGD_Allreduce/grads_0, DistributedSGD_Allreduce/grads_1]",
    ]:
        newest.line(line)
    assert newest.holding_up(4) == (
        [2],
        "missing from every stalled tensor, which its peers submitted (Horovod's stall inspector)",
    )
    middle = HorovodStalls()
    middle.line("HorovodBroadcast_dense_bias_0 [missing ranks: 1, 3]")
    assert middle.holding_up(None) is not None and middle.holding_up(None)[0] == [1, 3]  # type: ignore[index]
    oldest = HorovodStalls()
    oldest.line("Stalled ops: allreduce.w [ready ranks: 0, 1, 3], allreduce.b [ready ranks: 3, 1, 0]")
    assert oldest.holding_up(None) is not None and oldest.holding_up(None)[0] == [2]  # type: ignore[index]


def test_horovods_shutdown_is_a_lost_peers_consequence() -> None:
    log = (
        '[1,1]<stderr>:Traceback (most recent call last):\n[1,1]<stderr>:  File "train.py", line 9, in <module>\n'
        "[1,1]<stderr>:horovod.common.exceptions.HorovodInternalError: Horovod has been shut down. This was caused by "
        "an exception on one of the ranks or an attempt to allreduce, allgather or broadcast a tensor after one of "
        "the ranks finished execution."
    )
    facts = read_log(io.StringIO(log))
    assert facts.raised[1].consequence, "Open MPI's tag is the rank; its exception names another's"


def test_every_rank_missing_from_a_tensor_another_submitted_blames_nobody() -> None:
    """Each rank waits on another (a join, uneven data): no rank is behind the rest."""
    stalls = HorovodStalls()
    for line in ["Missing ranks:", "0: [allreduce.a, allreduce.b]", "1: [allreduce.b]", "2: [allreduce.a]"]:
        stalls.line(line)
    assert stalls.holding_up(3) is None and "diverged" in (stalls.diverged(3) or "")
    assert stalls.diverged(4) is None and stalls.holding_up(4) is not None, "rank 3 missing from none: not all"


def test_open_mpis_tag_before_a_missing_rank_leaves_the_rank_in_the_line() -> None:
    """``[1,0]<stderr>:2: [...]`` is rank 0's line naming rank 2, not srun's task 2's."""
    assert unlabelled("[1,0]<stderr>:2: [allreduce.a]").text == "[rank0]:2: [allreduce.a]"
    assert unlabelled("4: [1,0]<stderr>:x").text == "[rank0]:x", "srun's label before the tag is still srun's"


# --- the store, Ray's actors, a launcher's own signal ----------------------------------------------


def test_a_process_that_never_reached_the_store_blames_the_set_up() -> None:
    log = (
        "[E socket.cpp:957] [c10d] The client socket has timed out after 600s while trying to connect to "
        "(10.9.8.7, 23456).\nTraceback (most recent call last):\n"
        '  File "/usr/bin/torchrun", line 8, in <module>\n'
        "torch.distributed.DistNetworkError: The client socket has timed out after 600s while trying to connect to "
        "(10.9.8.7, 23456)."
    )
    verdict = assign_blame(analyze_text(log))
    assert verdict.nobody is not None and "10.9.8.7:23456 within 600s" in verdict.nobody
    assert "the set-up, not a rank" in verdict.nobody and not verdict.suspects
    bridge = log.replace("10.9.8.7", "172.17.0.9")
    assert "Docker's default bridge" in (assign_blame(analyze_text(bridge)).nobody or "")
    for never in (
        "torch.distributed.DistStoreError: Timed out after 301 seconds waiting for clients. 3/4 clients joined.",
        "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has "
        "failed. See inner exception for details.",
    ):
        said = assign_blame(analyze_text(never)).nobody
        assert said is not None and "the set-up, not a rank" in said, never


def test_a_store_based_barrier_that_counted_more_than_the_world_blames_the_launch() -> None:
    line = (
        "Waiting in store based barrier to initialize process group for rank: {r}, key: store_based_barrier_key:1 "
        "(world_size=4, worker_count={n}, timeout=0:30:00)"
    )
    over = assign_blame(analyze_text("\n".join(line.format(r=r, n=6) for r in (0, 1))))
    assert over.nobody is not None and "6 arrivals in a world of 4" in over.nobody
    short = assign_blame(analyze_text("\n".join(line.format(r=r, n=3) for r in (0, 1, 2))))
    assert short.nobody is None and [s.rank for s in short.suspects] == [3]
    assert "3 of 4 ranks reached it" in short.headline


def test_torchruns_agent_signalled_itself_blames_no_rank() -> None:
    log = (
        "WARNING:torch.distributed.elastic.agent.server.api:Received 1 death signal, shutting down workers\n"
        "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 4242 closing signal SIGHUP"
    )
    verdict = assign_blame(analyze_text(log))
    assert verdict.nobody is not None and "SIGHUP" in verdict.nobody and "nohup" in verdict.nobody
    named = log.replace("Received 1 death", "Received Signals.SIGHUP death")  # as Python 3.11 formats it
    assert assign_blame(analyze_text(named)).nobody == verdict.nobody
    failed = "[rank1]: Traceback (most recent call last):\n[rank1]: RuntimeError: CUDA error: misaligned address\n"
    assert alone(assign_blame(analyze_text(failed + log))) == [1], "a rank that failed of its own goes first"


def test_rays_dead_actor_is_the_rank_verl_names_it_after() -> None:
    """verl names its workers ``{prefix}{class}_{placement group}:{local rank}``: in the first
    placement group the local rank is the rank; Ray does not say whether it died first."""
    died = (
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
        "\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict\n"
        "\tpid: 31337\n"
        "\tname: aBcDeFWorkerDict_{pg}:3\n"
        "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: "
        "Worker unexpectedly exits with a connection error code 2."
    )
    verdict = assign_blame(analyze_text(died.format(pg=0)))
    assert verdict.culprits == [] and [s.rank for s in verdict.suspects] == [3]
    assert "aBcDeFWorkerDict_0:3 died (SYSTEM_ERROR)" in verdict.suspects[0].why
    assert not assign_blame(analyze_text(died.format(pg=1))).suspects, "a later placement group's ranks: unknown"
    fields = "\tactor_id: 1bc865d7417ba6d5182635e30a000000\n" + died.format(pg=0).split("\n", 2)[2]
    assert [s.rank for s in assign_blame(analyze_text(fields)).suspects] == [3], "its error's line cut above"
    unsaid = fields.rsplit("\n", 1)[0]  # Ray's reason cut too: nothing says the actor died
    assert not assign_blame(analyze_text(unsaid)).suspects


def test_deepspeeds_launcher_with_one_worker_names_it() -> None:
    """The command its line prints is the last worker's: where that is local rank 0, it was the only one."""
    line = (
        "[2024-01-02 03:04:05,678] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py', "
        "'--local_rank={k}', '--epochs', '3'] exits with return code = -9"
    )
    assert [(e.unit, e.who) for e in read_launcher(line.format(k=0))] == [(LOCAL_RANK, 0)]
    assert [(e.unit, e.who) for e in read_launcher(line.format(k=3))] == [(WORKER, -1)]
    assert [s.rank for s in assign_blame(analyze_text(line.format(k=0))).suspects] == [0]


def test_torchruns_table_ends_in_its_root_cause_and_a_retyped_one_is_read() -> None:
    """The closing ``====`` border follows the root cause's entry, whatever the paste cut before it."""
    tail = (
        "  rank      : 2 (local_rank: 2)\n  exitcode  : -11 (pid: 777)\n  traceback : Signal 11 (SIGSEGV)\n" + "=" * 40
    )
    [exit] = read_launcher(tail)
    assert exit.who == 2 and exit.first and exit.code == -11
    retyped = "Root Cause (first observed failure) :\n[0]:\nrank3 (local rank: 3)exitcode: -9 (pid: 12)\n"
    [exit] = read_launcher(retyped)
    assert (exit.who, exit.code, exit.first) == (3, -9, True)


def test_the_same_exception_from_as_many_processes_as_the_world_is_alike() -> None:
    world = "[launch.py:100:main] dist_world_size=2\n"
    raised = 'Traceback (most recent call last):\n  File "run.py", line 1, in <module>\n'
    raised += "OSError: [Errno 28] No space left on device\n"
    verdict = assign_blame(analyze_text(world + raised * 2))
    assert verdict.nobody is not None and "2 processes failed alike" in verdict.nobody
    assert assign_blame(analyze_text(world + raised)).nobody is None, "one traceback of two processes: not alike"


# --- NCCL's own lines, the transports, the copy -------------------------------------------------


def test_nccl_places_ranks_on_hosts_and_says_when_it_was_misused() -> None:
    nccl = NcclLines()
    nccl.line(
        "gpu-7:4711:4790 [3] NCCL INFO comm 0x5562514f5b40 rank 11 nranks 16 cudaDev 3 busId e3000 - Init COMPLETE"
    )
    nccl.line("gpu-7.cluster:4712:4791 [0] NCCL INFO comm 0x55ca3b72c550 rank 8 nranks 16 cudaDev 0 - Init COMPLETE")
    assert nccl.nranks == 16 and nccl.ranks_on("gpu-7") == [8, 11]
    nccl.line("ncclInvalidUsage: This usually reflects invalid usage of NCCL library.")
    nccl.line("Duplicate GPU detected : rank 5 and rank 1 both on CUDA device 1000")
    assert (nccl.misused() or "").endswith(": ranks 1 and 5 both on CUDA device 1000"), "the telling words win"
    verdict = assign_blame(analyze_text("[rank5]: RuntimeError: NCCL error: invalid usage\nncclInvalidUsage: x"))
    assert verdict.nobody is not None and verdict.culprits == [] and verdict.suspects == []


def test_nccls_warnings_are_a_jobs_lines_and_its_nvls_transport_is_the_nodes() -> None:
    line = "gpu47:4962:5097 [1] transport/nvls.cc:223 NCCL WARN Cuda failure 999 'unknown error"
    nccl = NcclLines()
    assert nccl.line(line) and nccl.nvls == "Cuda failure 999 'unknown error"
    verdict = assign_blame(analyze_text(line))
    assert verdict.nobody is not None and "NVLink fabric" in verdict.nobody
    verdict = assign_blame(
        analyze_text(line + "\n[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered")
    )
    assert alone(verdict) == [1], "a rank's own failure is not the fabric's"


def test_the_processes_printing_nccls_lines_are_ranks_the_world_has() -> None:
    log = "\n".join(
        [f"h:{600 + d}:{700 + d} [{d}] NCCL INFO [Service thread] Connection closed by localRank 2" for d in range(4)]
        + [
            f"[rank{r}]:[E ProcessGroupNCCL.cpp:754] [Rank {r}] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=305, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600381 "
            "milliseconds before timing out."
            for r in range(3)
        ]
    )
    analysis = analyze_text(log)
    verdict = assign_blame(analysis)
    assert analysis.world == 4 and verdict.nobody is None and [s.rank for s in verdict.suspects] == [3]
    alone = assign_blame(analyze_text(log.split("\n[rank0]")[0]))
    assert alone.suspects == [], "which ranks the processes are, only ranks the log shows can say"


def test_a_transport_names_the_peer_it_lost_and_the_fabric_is_no_rank() -> None:
    peers = PeerLines()
    peers.line(
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.0.0.2]:14004",
        3,
    )
    peers.line("[../pair.cc:589] Read error [10.0.0.4]:25266: Connection reset by peer", None)
    peers.line("socketProgress: Connection closed by remote peer gpu-9.cluster<59116>", None)
    peers.line(
        "n1:9:9 [4] NCCL WARN NET/IB : Got completion from peer 10.0.0.5<54862> with status=12 opcode=0 len=0", None
    )
    store = (
        "[E1206 TCPStore.cpp:180] [c10d] recvValue failed on SocketImpl(fd=62, addr=[node-a]:54838, "
        "remote=[node-b]:29500): failed to recv, got 0 bytes"
    )
    assert not peers.line(store, 0), "c10d's store is no peer (stores.py reads it)"
    assert [(p.peer, p.how, p.witness) for p in peers.losses] == [
        ("10.0.0.2", CLOSED, 3),
        ("10.0.0.4", CLOSED, None),
        ("gpu-9.cluster", CLOSED, None),
        ("10.0.0.5", FABRIC, None),
    ]
    assert peers.peers() == ["10.0.0.2", "10.0.0.4", "gpu-9.cluster"] and not peers.fabric_only


def test_a_lost_peers_host_places_the_suspects() -> None:
    log = "\n".join(
        [
            "node-a:11:12 [0] NCCL INFO comm 0x1 rank 0 nranks 4 cudaDev 0 - Init COMPLETE",
            "node-a:13:14 [1] NCCL INFO comm 0x2 rank 1 nranks 4 cudaDev 1 - Init COMPLETE",
            "node-b:21:22 [0] NCCL INFO comm 0x3 rank 2 nranks 4 cudaDev 0 - Init COMPLETE",
            "node-b:23:24 [1] NCCL INFO comm 0x4 rank 3 nranks 4 cudaDev 1 - Init COMPLETE",
            "[rank0]: Traceback (most recent call last):",
            "[rank0]: RuntimeError: NCCL error: remote process exited or there was a network error, NCCL 2.21.5",
            "[rank0]: socketProgress: Connection closed by remote peer node-b<59116>",
        ]
    )
    verdict = assign_blame(analyze_text(log))
    assert [s.rank for s in verdict.suspects[:2]] == [2, 3] and "node-b" in verdict.suspects[0].why


def test_open_mpis_and_horovodruns_tags_are_ranks_where_torchrun_gives_none() -> None:
    tagged = unlabelled("[1,5]<stderr>:Traceback (most recent call last):")
    assert tagged.text == "[rank5]:Traceback (most recent call last):"
    assert unlabelled("Fri Sep 25 16:52:57 2020[1]<stderr>:User function").text == "[rank1]:User function"
    worker = "(VllmWorker rank=3 pid=226) ERROR 06-26 23:10:17 [multiproc_executor.py:527] Traceback (most"
    assert unlabelled(worker).text == "[rank3]:Traceback (most", "vLLM's worker label is its rank; its logger's goes"
    assert unlabelled("(RayWorkerWrapper pid=4009) x").text == "x", "a Ray actor's pid is no rank"
    assert unlabelled("[2]<stdout>:loss 0.1").text == "[rank2]:loss 0.1"
    assert unlabelled("[1,0]<stderr>:[rank4]: x").text == "[rank4]: x", "torchrun's prefix wins"
    assert unlabelled("3: [rank9]: y").text == "[rank9]: y" and unlabelled("3: y").text == "y", "srun's task is no rank"


# --- the watchdog's dump signal; a collective no peer issued -------------------------------------


def test_a_watchdog_message_broken_over_indented_lines_and_elided_is_read_without_a_number() -> None:
    pasted = [
        "[Rank 0] Watchdog caught collective operation timeout:",
        "  WorkNCCL(..., OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000)",
        "  ran for 1800090 milliseconds before timing out.",
        '  File "train.py", line 3, in <module>',
    ]
    [joined, frame] = [written.text for written in lines_as_written(pasted)]
    found = watchdog_said(joined)
    assert found is not None and (found.bare, found.op, found.seq, found.ran) == (0, "all_reduce", None, 1800.09)
    assert frame == pasted[-1], "a traceback's frame is no rest of the message"
    verdict = assign_blame(analyze_text("\n".join(pasted[:3])))
    assert verdict.nobody is None, "no number: not the first collective, which never completed anywhere"
    assert [s.rank for s in verdict.suspects] == [1, 0], "rank 0 waited: the other first, rank 0 alone after"
    assert "its number not in the log" in verdict.headline
    assert "1 ranks" not in verdict.headline


def test_a_prefixed_exception_line_without_its_traceback_is_the_ranks_last_words() -> None:
    log = (
        "2024-11-20 14:37:16 [rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 132.00 MiB.\n"
        "[rank1]: Epoch: 3\n[rank2]: RuntimeError: [Rank 2] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600000 milliseconds before timing out."
    )
    facts = read_log(io.StringIO(log))
    assert set(facts.raised) == {3} and facts.raised[3].type == "torch.OutOfMemoryError"
    assert 2 in facts.timeouts, "a watchdog's line says the rank waited, not that it failed of its own"


def test_a_rooted_collective_its_root_completed_leaves_the_others_waiting_not_behind() -> None:
    def line(rank: int, seq: int) -> str:
        return (
            f"[rank{rank}]:[E822 16:31:16.1 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=BROADCAST, NumelIn=8, NumelOut=8, Timeout(ms)=600000) "
            f"ran for 600009 milliseconds before timing out.\n[rank{rank}]:[E822 16:31:16.2 ProcessGroupNCCL.cpp:2271] "
            f"[PG ID 4 PG GUID 67 Rank {rank}]  failure detected by watchdog at work sequence id: {seq} PG status: "
            f"last enqueued work: 6464, last completed work: {seq - 1}"
        )

    verdict = assign_blame(analyze_text(line(0, 5730) + "\n" + line(3, 5729)))
    assert verdict.culprits == [] and [s.rank for s in verdict.suspects] == [1, 2], "the root finishes first"
    verdict = assign_blame(analyze_text((line(0, 5730) + "\n" + line(3, 5729)).replace("BROADCAST", "ALLREDUCE")))
    assert verdict.culprits == [3], "an all-reduce a peer completed, this rank did not finish"


def test_the_dump_signal_says_what_the_group_has_in_flight_and_who_fired() -> None:
    prefix = "[PG ID 0 PG GUID 0(default_pg) Rank 2] Received a dump signal due to a collective timeout from "
    busy = watchdog_said(
        prefix + "this local rank and we will ... Last enqueued NCCL work: 22, last completed NCCL work: 21."
    )
    assert busy is not None and (busy.seq, busy.idle, busy.fired_by) == (22, False, None)
    idle = watchdog_said(prefix + " rank 6 and we will ... Last enqueued NCCL work: 40, last completed NCCL work: 40.")
    assert idle is not None and (idle.seq, idle.idle, idle.fired_by) == (None, True, 6)


def test_a_lone_waiting_rank_whose_peers_raised_in_another_collective_issued_a_different_one() -> None:
    log = "\n".join(
        [
            "[rank0]:[E0101 00:10:00.0 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=57, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
            "600010 milliseconds before timing out.",
            *(
                line.format(r=r)
                for r in (1, 2)
                for line in (
                    "[rank{r}]: Traceback (most recent call last):",
                    '[rank{r}]:   File "/py/torch/distributed/distributed_c10d.py", line 2501, in all_reduce',
                    "[rank{r}]:     work.wait()",
                    "[rank{r}]: torch.distributed.DistBackendError: NCCL communicator was aborted on rank {r}.",
                )
            ),
        ]
    )
    verdict = assign_blame(analyze_text(log))
    assert verdict.culprits == [0] and "issued broadcast where ranks 1-2 issued all_reduce" in verdict.headline
    assert op_family("_ALLGATHER_BASE") == op_family("all_gather_into_tensor") == "all_gather"
    assert op_family("barrier") == "all_reduce", "NCCL runs a barrier as an all-reduce"


WAITED = (
    "[rank{r}]:[E0101 00:10:00.{r} ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=57, OpType={op}, NumelIn={n}, NumelOut={n}, Timeout(ms)=600000) ran for "
    "600010 milliseconds before timing out."
)


def test_ranks_at_one_collective_number_with_another_input_size_issued_another_collective() -> None:
    """A broadcast is the same size on every rank: the one rank of three with another size is odd."""
    log = "\n".join(WAITED.format(r=r, op="BROADCAST", n=4096 if r == 2 else 1) for r in range(3))
    verdict = assign_blame(analyze_text(log))
    assert verdict.culprits == [2] and "broadcast of 4096 elements" in verdict.headline


def test_as_many_ranks_in_each_op_at_one_number_are_suspected_not_proven() -> None:
    """Two ranks, one in each op: the lines say they disagree, not which is odd."""
    log = "\n".join(WAITED.format(r=r, op=op, n=1) for r, op in ((0, "ALLREDUCE"), (1, "BROADCAST")))
    verdict = assign_blame(analyze_text(log))
    assert verdict.culprits == [] and sorted(s.rank for s in verdict.suspects[:2]) == [0, 1]
    assert "which side is odd, the lines do not say" in verdict.suspects[0].why


def test_accounts_naming_ranks_beyond_any_job_cost_nothing() -> None:
    """A hostile log's reports may name a billion ranks: none is counted one by one."""
    log = "\n".join(
        [
            "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks",
            "t [ready ranks: 999999999]",
            FINGERPRINT.format(a=1, b=999999999),
            "srun: error: n1: tasks 0-999999999: Killed",
            "- [0] Timeout at collective: ALLREDUCE, #1",
            "- To our best knowledge, ranks [999999999] are the lagging ranks that caused this timeout.",
        ]
    )
    started = time.monotonic()
    verdict = assign_blame(analyze_text(log))
    assert time.monotonic() - started < 5.0
    assert all(r < 1 << 20 for r in verdict.culprits)


def test_torchruns_tee_prefix_names_the_rank_on_one_node_and_gloos_lost_peer_points_to_the_silent_one() -> None:
    """torch 1.9-2.1's ``--tee 3`` writes ``[default1]:``: ranks 1-2 lost the peer that left, rank 0."""
    log = "\n".join(
        line.format(r=r)
        for r in (1, 2)
        for line in (
            "[default{r}]:Traceback (most recent call last):",
            '[default{r}]:  File "/py/torch/distributed/distributed_c10d.py", line 1536, in all_reduce',
            "[default{r}]:    work.wait()",
            "[default{r}]:RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
            "[127.0.0.1]:19521",
        )
    )
    verdict = assign_blame(analyze_text(log))
    assert verdict.culprits == [] and [s.rank for s in verdict.suspects] == [0]
    assert "ranks 1-2 raised because a peer was lost" in verdict.headline


def test_alike_compares_exceptions_where_the_log_holds_them_and_exits_where_it_does_not() -> None:
    traced = TABLE.replace("-15 (pid: 101)", "1 (pid: 101)").replace("-9 (pid: 102)", "1 (pid: 102)")
    traced = traced.replace("10:00:07", "10:00:05")
    oom = "\n".join(
        f"[rank{r}]: Traceback (most recent call last):\n[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. "
        f"Tried to allocate {r + 1}.00 GiB. GPU {r} has a total capacity of 79.1 GiB"
        for r in (1, 2)
    )
    verdict = assign_blame(analyze_text(f"{oom}\n{traced}"))
    assert verdict.nobody is not None and "torch.OutOfMemoryError: CUDA out of memory" in verdict.nobody
    one = oom.split("\n[rank2]")[0]
    assert alone(assign_blame(analyze_text(one))) == [1], "one rank out of memory, no other shown: suspected"


# --- a log as pasted: the paste's margin and wraps, a stamp, colour; an excerpt's cut -------------

WAIT = (
    "[rank{r}]:[E0501 12:00:01.1 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=57, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 "
    "milliseconds before timing out."
)


def texts(pasted: str) -> list[str]:
    return [written.text for written in lines_as_written(io.StringIO(pasted))]


def test_a_terminals_soft_wrap_is_joined_at_the_width_the_paste_shows() -> None:
    whole = [WAIT.format(r=r) for r in (1, 2)] + ["[rank3]: RuntimeError: CUDA error: an illegal memory access was met"]
    wrapped = "".join(line[i : i + 80] + "\n" for line in whole for i in range(0, len(line), 80))
    assert texts(wrapped) == whole
    spaced = [*whole, "[rank3]: " + "x" * 69 + "  of 8 ranks joined"]  # its width falls after a run of spaces
    assert texts("".join(line[i : i + 80] + "\n" for line in spaced for i in range(0, len(line), 80))) == spaced
    one = "mpirun noticed that process rank 7 with PID 0 on node n1 exited on signal 9 (Killed)."
    assert texts(f"{one[:80]}\n{one[80:]}\n") == [one], "one line carrying on at a width terminals open at"
    pod = "mpirun noticed that process rank 1 with PID 39 on node berttrainer-job-mpijob-worker-1 exited on signal 9"
    cut = pod.index("rker-1")
    assert cut == 80 and texts(f"{pod[:cut]}\n{pod[cut:]}\n") == [pod], "a rest that reads as stern's pod, container"
    odd = "x" * 77
    assert texts(f"{odd}\nmore\n") == [odd, "more"], "one line of a width no terminal opens at proves no wrap"
    natural = [WAIT.format(r=r) for r in (1, 2, 3)]
    assert texts("\n".join(natural)) == natural, "lines as long as each other, each starting a record, are lines"
    frames = [f'  File "/job/{"x" * 60}.py", line {n}, in f' for n in (10, 20)]
    traceback = [frames[0], "    f()", frames[1], "    g()"]
    assert texts("\n".join(traceback)) == [line[2:] for line in traceback], "its indent all share, nothing joined"


def test_a_stamp_before_each_line_is_taken_off_and_kept_as_the_lines_time() -> None:
    line = "[rank3]: torch.OutOfMemoryError: CUDA out of memory."
    for stamp in (
        "2024-05-01 12:00:01,234 - INFO - ",
        "[2024-05-01 12:00:01] ",
        "2024-05-01T12:00:01.123456Z stdout F ",
        "2024-05-01T12:00:01.123Z\t",  # a collector's export (CloudWatch's, Loki's) with a tab after the time
    ):
        [written] = lines_as_written([stamp + line])
        assert written.text == line and written.stamp.startswith("2024-05-01"), stamp
    for stamp in ("12:00:01.234 ", "[12:00:01] ", "05/01/2024 12:00:01 - INFO - "):  # the day left out, or put first
        [written] = lines_as_written([stamp + line])
        assert written.text == line and "12:00:01" in written.stamp, stamp
    facts = read_log(
        io.StringIO("2024-05-01T12:00:09.5Z stdout F [rank3]: Traceback (most recent call last):\n" + line)
    )
    assert facts.raised[3].at == 1714564809.5, "an unstamped line takes the time of the one before"


def test_colour_codes_anywhere_and_the_pastes_shared_margin_hide_nothing() -> None:
    line = "[rank7]: RuntimeError: CUDA error: an illegal memory access was encountered"
    coloured = (
        "\x1b[1;31m[rank7]:\x1b[0m RuntimeError: \x1b[35mCUDA error\x1b[0m: an illegal memory access was encountered"
    )
    assert texts(coloured) == [line]
    table = ["  rank      : 1 (local_rank: 1)", "  exitcode  : -9 (pid: 2630)"]
    assert texts("\n".join(f">     {row}" for row in table)) == [row.strip() for row in table], "the indent all share"
    kept = ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>']
    assert texts("\n".join(kept)) == kept, "a margin some lines lack is the text's own"


def test_a_log_a_web_page_typeset_reads_as_the_job_wrote_it() -> None:
    """Text copied off a web page or a forum's post (no code block) carries no-break spaces and typographic quotes,
    off a page's source its escapes, off a console its padding, out of an issue its code block's fences: the frames,
    the exception and the watchdog's lines are read as written."""
    written = [
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "/w/train.py", line 12, in <module>',
        "[rank1]:     loss = model(batch)",
        "[rank1]: KeyError: 'label'",
        WAIT.format(r=0),
    ]
    typeset = [
        line.replace("  ", "\u00a0 ").replace('File "', "File \u201c").replace('", line', "\u201d, line")
        for line in written
    ]
    typeset[3] = typeset[3].replace("'label'", "\u2018label\u2019")
    assert texts("\n".join(typeset)) == written
    assert assign_blame(analyze_text("\n".join(typeset))).culprits == [1]
    escaped = [line.replace('"', "&quot;").replace("'", "&#x27;") for line in written]  # a page's source
    assert texts("\n".join(escaped)) == written
    padded = [line.ljust(200) for line in written]  # a console's copy, each line padded to its width
    assert texts("\n".join(padded)) == written
    fenced = ["```python", "\ufeff" + written[0], *written[1:], "```"]  # a code block copied whole, a file's BOM
    assert [line for line in texts("\n".join(fenced)) if line] == written


def test_the_numbers_a_viewer_puts_before_each_line_are_taken_off() -> None:
    """A log copied off a CI's page or an editor with its line numbers: each rises by one from a line to the next,
    whatever the width they are padded to; a number a job's own line starts with is its own."""
    written = [WAIT.format(r=0), "[rank1]: Traceback (most recent call last):", "[rank1]: KeyError: 'label'"]
    for form in ("{n} {line}", "{n:>6}  {line}", "{n}\t{line}"):
        assert texts("\n".join(form.format(n=n, line=line) for n, line in enumerate(written, start=98))) == written
    own = ["3 ranks joined", WAIT.format(r=0), "[rank1]: KeyError: 'label'"]
    assert texts("\n".join(own)) == own


def test_a_paste_double_spaced_reads_as_the_job_wrote_it() -> None:
    """A blank line after each (a file whose lines end in two carriage returns, a forum's spacing): its lines read as
    the job wrote them, a blank line of the log's own kept, a terminal's wrap under it joined again, torchrun's table
    whole; a log with a few blank lines of its own keeps them."""
    table = [
        "[1]:",
        "  rank      : 1 (local_rank: 1)",
        "  traceback : Signal 7 (SIGBUS) received by PID 5063",
        "[2]:",
        "  rank      : 2 (local_rank: 2)",
        "  traceback : Signal 7 (SIGBUS) received by PID 5064",
        "",
        "Root Cause (first observed failure):",
    ]
    crcrlf = io.TextIOWrapper(io.BytesIO("\r\r\n".join(table).encode()))  # read as analyze reads a file
    assert [written.text for written in lines_as_written(crcrlf)] == table
    wrapped = WAIT.format(r=0)
    pieces = [wrapped[:80], wrapped[80:160], wrapped[160:], "[rank1]: KeyError: 'label'"]
    assert texts("\n\n".join(pieces)) == [wrapped, "[rank1]: KeyError: 'label'"]
    own = ["Traceback (most recent call last):", "", '  File "train.py", line 3, in <module>', "KeyError: 'x'"]
    assert texts("\n".join(own)) == own


def test_a_code_fence_glued_to_a_logs_first_word_leaves_the_word() -> None:
    """A fence glued to the log's first line takes off a language's name after it, not the job's first word."""
    assert texts("```Process 0 exit with status code 137.\nkilled```") == [
        "Process 0 exit with status code 137.",
        "killed",
    ]
    assert texts("```python Traceback (most recent call last):") == ["Traceback (most recent call last):"]


def test_nccls_own_lines_under_its_error_are_no_wraps_rest() -> None:
    """torch's NCCL error names ProcessGroupNCCL.cpp, as a watchdog's line a terminal wrapped may: the line under it
    that NCCL starts with its result's name is a line of its own."""
    error = (
        "[rank1]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:2897, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.27.3"
    )
    lines = [error, "[rank1]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library."]
    assert texts("\n".join(lines)) == lines
    assert texts("\n".join(line.removeprefix("[rank1]: ") for line in lines)) == [
        line.removeprefix("[rank1]: ") for line in lines
    ]


def test_srun_labels_an_indented_line_too() -> None:
    assert unlabelled('0:   File "train.py", line 3, in <module>').text == '  File "train.py", line 3, in <module>'


def test_the_first_pg_to_signal_dumping_and_a_watchdog_message_cut_before_its_work_say_the_rank_waited() -> None:
    first = (
        "[rank2]:[E0501 12:00:01.2 ProcessGroupNCCL.cpp:2103] [PG ID 0 PG GUID 0(default_pg) Rank 2] First PG on "
        "this rank to signal dumping."
    )
    found = watchdog_said(first)
    assert found is not None and found.fired and found.local == 2
    verdict = assign_blame(analyze_text(f"{WAIT.format(r=3)}\n{first}"))
    assert [s.rank for s in verdict.suspects] == [0, 1], "rank 2's watchdog fired: it waited with rank 3"
    cut = (
        "RuntimeError: NCCL communicator was aborted on rank 2.  Original reason for failure was: [Rank 2] "
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=10"
    )
    found = watchdog_said(cut)
    assert found is not None and found.fired and found.bare == 2 and found.seq is None


def test_a_traceback_cut_before_its_exception_line_is_suspected_not_proven() -> None:
    cut = '[rank2]: Traceback (most recent call last):\n[rank2]:   File "/job/grpo.py", line 277, in <module>\n'
    verdict = assign_blame(
        analyze_text(cut + "[rank3]:  Original exception: \n[rank3]: Timed out waiting 600000ms for send")
    )
    assert verdict.culprits == [] and verdict.suspects[0].rank == 2
    assert "cut before its exception line" in verdict.suspects[0].why
    head = '[rank1]: Traceback (most recent call last):\n[rank1]:   File "/job/train.py", line 9, in <module>\n'
    verdict = assign_blame(analyze_text(head + "[rank1]: RuntimeError: "))
    assert (
        verdict.culprits == []
        and verdict.suspects[0].why == "it raised RuntimeError: the log is cut before its message"
    )
    assert alone(assign_blame(analyze_text(head + "[rank1]: RuntimeError: \n[rank1]: CUDA error: unknown error"))) == [
        1
    ]


def test_lone_waits_further_apart_than_one_groups_are_of_groups_the_log_does_not_name() -> None:
    old = "[E ProcessGroupNCCL.cpp:458] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={n}, "
    old += "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25625593 milliseconds before timing out."
    facts = read_log(io.StringIO(old.format(r=0, n=96125) + "\n" + old.format(r=7, n=64088)))
    assert facts.timeouts == {} and sorted(facts.unnamed) == [0, 7]
    assert assign_blame(analyze_text(old.format(r=0, n=96125) + "\n" + old.format(r=7, n=64088))).culprits == []
    near = read_log(io.StringIO(old.format(r=0, n=96125) + "\n" + old.format(r=7, n=96124)))
    assert sorted(near.timeouts) == [0, 7] and near.unnamed == {}, "a work apart: one group's"


def test_one_stalled_tensor_few_ranks_submitted_proves_nobody() -> None:
    stalls = HorovodStalls()
    stalls.line("Stalled ops: HorovodAllreduce_loss_Mean_0 [ready ranks: 3], DistributedMo")
    assert stalls.holding_up(None) is None
    assert [r for r, _ in stalls.suspected(None)] == [3, 0, 1, 2], "the one that submitted it may be the odd one"
    two = HorovodStalls()
    two.line("HorovodBroadcast_dense_bias_0 [missing ranks: 1]")
    assert two.holding_up(2) is not None and two.suspected(2) == [], "as many submitted it as missed it"


def test_an_excerpt_of_a_jobs_words_alone_is_a_jobs_log_and_a_named_text_is_judged() -> None:
    frames = (
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7ef4 in /py/torch/lib/libc10.so)\n"
    )
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "frames.log").write_text(frames)
        (Path(folder) / "notes.txt").write_text("Fault ranks: [9, 14]\n")
        found = analyze([folder])
        assert found.logs == 1 and any("notes.txt: text with no watchdog line" in p for p in found.problems)
        named = analyze([str(Path(folder) / "notes.txt")])
        assert named.logs == 1 and any("nothing to judge" in p for p in named.problems)
        assert "nothing to judge" in assign_blame(named).headline


def test_a_timeout_cut_short_by_the_excerpt_is_not_read() -> None:
    cut = WAIT.format(r=1).split("Timeout(ms)=")[0] + "Timeout(ms)=6000"
    found = watchdog_said(cut)
    assert found is not None and found.timeout_ms is None
    assert assign_blame(analyze_text(cut)).nobody is None, "no timeout absurdly low where its number was cut"


def test_an_op_whose_name_the_excerpt_cut_is_not_read_as_another_op() -> None:
    """The paste ends inside the last rank's OpType: its wait is read, its op not (``ALLRE`` is no op that
    would put it at odds with the ranks in ``ALLREDUCE``)."""
    waits = "".join(WAIT.format(r=r) + "\n" for r in (1, 3)) + WAIT.format(r=2).split("OpType=")[0] + "OpType=ALLRE"
    found = watchdog_said(waits.splitlines()[-1])
    assert found is not None and found.op is None
    verdict = assign_blame(analyze_text(waits))
    assert 2 not in verdict.culprits and "allre" not in verdict.headline
    cut = Fingerprint.read("CollectiveFingerPrint(SequenceNumber=101, OpType=ALLGA")
    assert (cut.seq, cut.op) == (101, None), "TORCH_DISTRIBUTED_DEBUG's fingerprint cut alike"
    assert Fingerprint.read("CollectiveFingerPrint(SequenceNumber=10").seq is None


def test_tensorflows_graph_execution_error_is_read_at_its_own_words_after_the_op() -> None:
    """TensorFlow 2.9 on says ``Graph execution error:``, then the frames that built the failed op, then ``Node:``,
    then the error: rank 2's is Horovod shut down under it (another's consequence), rank 1's own words cut from the
    paste (no failure of its own proven: an op of Horovod's collectives failed, as another's consequence does; the
    rank the log does not show is suspected, not rank 1), rank 3's a shape error of its own."""
    head = (
        "[1,{r}]<stderr>:Traceback (most recent call last):\n"
        '[1,{r}]<stderr>:  File "/srv/train.py", line 40, in <module>\n'
        "[1,{r}]<stderr>:tensorflow.python.framework.errors_impl.{kind}: Graph execution error:\n"
        "[1,{r}]<stderr>:\n"
        "[1,{r}]<stderr>:Detected at node 'HorovodAllreduce_grads_7_0' defined at (most recent call last):\n"
        '[1,{r}]<stderr>:    File "/srv/train.py", line 40, in <module>\n'
        "[1,{r}]<stderr>:      model.fit(data)\n"
    )
    node = "[1,{r}]<stderr>:Node: 'HorovodAllreduce_grads_7_0'\n"
    shut = "[1,2]<stderr>:Horovod has been shut down. This was caused by an exception on one of the ranks.\n"
    shapes = "[1,3]<stderr>:Incompatible shapes: [8,3] vs. [8,4]\n"
    log = analyze_text(
        head.format(r=2, kind="UnknownError") + node.format(r=2) + shut + head.format(r=1, kind="UnknownError")
    ).log
    assert log.raised[2].consequence and "(at node 'HorovodAllreduce_grads_7_0')" in log.raised[2].message
    assert log.raised[1].cut and not log.raised[1].own and log.raised[1].consequence
    two = head.format(r=2, kind="UnknownError") + node.format(r=2) + shut + head.format(r=1, kind="UnknownError")
    assert [s.rank for s in assign_blame(analyze_text(two)).suspects][:1] == [0], "not rank 1, cut in Horovod's op"
    matmul = analyze_text(head.format(r=1, kind="UnknownError").replace("HorovodAllreduce_grads_7_0", "MatMul_3")).log
    assert not matmul.raised[1].consequence, "an op of its own work: cut, not another's consequence"
    own = analyze_text(head.format(r=3, kind="InvalidArgumentError") + node.format(r=3) + shapes).log.raised[3]
    assert own.own and own.message.startswith("Incompatible shapes: [8,3] vs. [8,4]")
    words = head.format(r=1, kind="UnknownError").splitlines()[:3]
    cut = analyze_text("\n".join(words).replace("Graph execution error:", "Graph ")).log.raised[1]
    assert cut.cut and not cut.own, "the paste ends within the words: what follows them is not in it"


def test_an_exception_line_whose_label_was_lost_under_a_ranks_last_frame_is_that_ranks() -> None:
    """Rank 2's frames, then its exception line without ``[rank2]:`` (a stream or the paste lost it): rank 2 raised
    it. A launcher's own exception there is not the rank's, nor a line that does not follow the rank's frame. A
    progress bar drawn at its start (0 done, after 00:00) is no rank going on beside the failures."""
    trainer = "/venv/lib/python3.11/site-packages/transformers/trainer.py"
    frames = (
        "[rank2]: Traceback (most recent call last):\n"
        '[rank2]:   File "/work/sft.py", line 67, in <module>\n'
        "[rank2]:     trainer.train()\n"
        f'[rank2]:   File "{trainer}", line 2560, in _inner_training_loop\n'
        f'[rank2]:   File "{trainer}", line 3782, in training_step\n'
        '[rank2]:   File "/venv/lib/python3.11/site-packages/torch/_tensor.py", line 626, in backward\n'
    )
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 388.00 MiB.\n"
    log = analyze_text(frames + oom).log
    assert log.raised[2].type == "torch.OutOfMemoryError" and not log.raised[2].cut
    launcher = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
    assert analyze_text(frames + launcher).log.raised[2].cut, "torchrun's own exception, not the rank's"
    assert analyze_text(frames + "[rank0]: step 3\n" + oom).log.raised[2].cut, "not under the rank's frame"
    bar = "  0%|          | 0/247 [00:00<?, ?it/s]\n"
    cut0 = frames.replace("[rank2]", "[rank0]").replace(
        '[rank0]:   File "/venv/lib/python3.11/site-packages/torch/_tensor.py", line 626, in backward\n', ""
    )
    verdict = assign_blame(analyze_text(bar + frames + oom + cut0))
    assert verdict.nobody is not None and "ranks 0, 2 failed alike" in verdict.nobody
    moving = bar.replace("0/247 [00:00", "3/247 [00:41")
    assert assign_blame(analyze_text(moving + frames + oom + cut0)).nobody is None, "a bar that moved: one went on"


def test_a_loggers_line_between_a_tracebacks_frames_is_no_exception() -> None:
    """Python's logging, in its default format (``WARNING:name:message``), writes between another process's frames:
    its level is no exception's name, and the traceback's own exception line, after, is the one read."""
    log = analyze_text(
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "/work/train.py", line 50, in main\n'
        "[rank1]: WARNING:data.cache:/work is not a git repository, hash check skipped.\n"
        '[rank1]:   File "/work/train.py", line 31, in load\n'
        "[rank1]: KeyError: 'speaker_7'\n"
    ).log
    assert (log.raised[1].type, log.raised[1].message) == ("KeyError", "'speaker_7'")


def test_each_reader_keeps_within_its_bounds_what_crafted_lines_name(monkeypatch: pytest.MonkeyPatch) -> None:
    stalls = HorovodStalls()
    assert not stalls.line("w" * 400 + " [missing ranks: 1]"), "a tensor's name is read from its start, not mid-word"
    stalls.line("t [missing ranks: 5, 200000]")
    assert stalls.missing == {"t": {5}}, "a rank from MAX_RANKS on is no real job's"
    monkeypatch.setattr(horovod, "MAX_RANKS", 4)
    stalls.line("t [missing ranks: " + ", ".join(map(str, range(4))) + "]")
    assert stalls.missing == {"t": {5, 0, 1, 2}}, "no more ranks a tensor than MAX_RANKS"

    monkeypatch.setattr(launcher_lines, "MAX_TASKS", 1000)
    exits = read_launcher("srun: error: h: tasks 0-999: Killed\n" * 5)
    assert len(exits) == 1000, "srun's tasks within one budget, not each line's"
    exits = read_launcher("=   RANK 1 PID 1 RUNNING AT n1\n=   KILLED BY SIGNAL: 9 (Killed)\n" * 1005)
    assert len(exits) == 1000, "Intel MPI's blocks kept to the log's end within the same budget"

    reports = desync(*["- [0] Timeout at collective: ALLREDUCE, #7", "  #7 started ranks:"] * 100)
    assert len(reports.reports) == MAX_REPORTS and all(r.numbers == {7} for r in reports.reports)
    one = desync(
        "- [0] Timeout at collective: ALLREDUCE, #7", "  #7 started ranks:", *["    [0, 1, 3] started X"] * 500
    )
    assert one.reports[0].started == {7: {"X": {0, 1, 3}}}, "a rank listed twice is one rank"

    stores = StoreLines()
    for _ in range(MAX_WAITS + 5):
        stores.line("[rank1]: torch.distributed.DistStoreError: wait timeout after 1000ms, keys: k", 1)
        stores.traceback(None, [StackFrame("a.py", 1, "main_process_first")], in_collective=True)
    assert len(stores.waits) == len(stores.main_first) == MAX_WAITS
    stores.line("store based barrier on rank: 1, for key: k (world_size=9999999999, worker_count=1, ", None)
    assert stores.counted is None, "a world no real job has"
    for rank in range(MAX_WAITS + 5):
        stores.line("recvValue failed on SocketImpl(fd=1, addr=[a]:1, remote=[b]:2): got 0 bytes", rank)
    assert len(stores.lost) == MAX_WAITS
    actors = RayActors()
    actors.line("ActorDiedError: The actor died unexpectedly")
    actors.line(f"\tname: {'w' * 5000}_0:1")
    actors.finish()
    assert actors.dead == [], "a name past 300 characters is none"
    for k in range(ray_actors.MAX_ACTORS + 5):
        actors.line("ActorDiedError: The actor died unexpectedly")
        actors.line(f"\tname: w_0:{k}")
    actors.finish()
    assert len(actors.dead) == ray_actors.MAX_ACTORS
    for _ in range(ray_actors.MAX_ACTORS + 5):
        actors.line("A worker died or was killed while executing a task ... The process receives a SIGTERM.")
    assert len(actors.terminated) == ray_actors.MAX_ACTORS
    for pid in range(ray_actors.MAX_ACTORS + 5):
        actors.line(f"A worker died or was killed while executing a task ... Worker PID: {pid} Worker exit type: X")
    actors.finish()
    assert len(actors.workers) == ray_actors.MAX_ACTORS
    monkeypatch.setattr(ray_actors, "MAX_WORKERS", 4)
    for pid in range(10):
        actors.line(f"- (ip=10.0.0.1, pid={pid}) world_rank={pid}, local_rank=0")
    assert len(actors.ranks) == 4

    native = Crashes()
    for _ in range(crashes.MAX_CRASHES + 5):
        native.line("[n1:1 :0:1] Caught signal 11 (Segmentation fault)")
        for n in range(crashes.MAX_FRAMES + 5):
            native.line(f" {n} 0x0000000000012345 ncclProxyService()  ???:0")
    assert len(native.crashes) == crashes.MAX_CRASHES and len(native.crashes[-1].frames) == crashes.MAX_FRAMES

    checks = DebugChecks()
    checks.line("Ranks 3, 2000000 failed to pass monitoredBarrier in 30 seconds")
    assert list(checks.failed) == [3]
    monkeypatch.setattr(distributed_debug, "MAX_RANKS", 4)
    checks.line("Ranks " + ", ".join(map(str, range(50))) + " failed to pass monitoredBarrier in 30 seconds")
    assert sorted(checks.failed) == [0, 1, 2, 3]


# --- a launcher's rank labels and a copy's other labels ------------------------------------------

MISSING_TENSORS = """\
[{a}] [2024-02-03 10:11:12.131415: W /src/horovod/common/stall_inspector.cc:107] One or more tensors were submitted \
to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60 \
seconds.
[{a}] Missing ranks:
[{a}] 2: [allreduce.layer1.weight, allreduce.layer1.bias]
[{a}] 3: [allreduce.layer1.weight, allreduce.layer1.bias]"""


def test_mpichs_and_intel_mpis_rank_label_is_told_from_a_pasted_files_line_numbers() -> None:
    """``mpiexec -l`` (as horovodrun runs MPICH and Intel MPI) puts ``[N] `` before each line of rank N:
    its numbers repeat from a line to the next, where a pasted file's line numbers rise by one."""
    log = MISSING_TENSORS.format(a=0)
    assert (
        texts(log)[1] == "[rank0]:Missing ranks:"
        and texts(log)[2] == "[rank0]:2: [allreduce.layer1.weight, allreduce.layer1.bias]"
    )
    verdict = assign_blame(analyze_text(log))
    assert verdict.culprits == [2, 3], "both missing from tensors a third rank submitted: the world has one more"
    numbered = "\n".join(f"[{n}] {line}" for n, line in enumerate(["x", WAIT.format(r=1), WAIT.format(r=3)], 500))
    assert texts(numbered)[1] == WAIT.format(r=1), "line numbers rising by one are the paste's own"
    labelled = "\n".join(f"[{r}] {WAIT.format(r=r).split(']:', 1)[1]}" for r in (3, 1, 3))
    assert sorted(read_log(io.StringIO(labelled)).timeouts) == [1, 3]


def test_a_programs_own_rank_labels_name_the_rank() -> None:
    """Lightning's ``[rank: 1] ``, a script's ``[rank1] ``, ``[RANK 1] ``, ``rank1: ``."""
    for label in ("[rank: 1] ", "[rank1] ", "[RANK 1] ", "rank1: ", "Rank 1: "):
        assert unlabelled(label + "RuntimeError: CUDA error: an illegal memory access").text.startswith("[rank1]:")
    assert alone(assign_blame(analyze_text("[rank: 3] torch.OutOfMemoryError: CUDA out of memory."))) == [3]


LABELS = {
    "pdsh (DeepSpeed's nodes)": "worker-3: ",
    "pdsh, an address": "10.1.2.3: ",
    "journald": "May 01 12:00:01 gpu-node7 python3[4321]: ",
    "kubectl --prefix": "[pod/job-worker-0/pytorch] ",
    "stern": "job-worker-0 pytorch ",
    "stern, a JobSet's pod": "llama-node-0-1-q9zrt node ",
    "Ray's process": "(pid=4242, ip=10.0.0.2) ",
    "Ray's raylet": "(raylet, ip=10.0.0.2) ",
    "SkyPilot": "(worker1, rank=1, pid=2101, ip=10.0.0.2) ",
    "hydra's logger": "[2024-05-01 12:00:01,234][torch.distributed.elastic][ERROR] - ",
    "loguru": "2024-05-01 12:00:01.234 | ERROR    | train:main:42 - ",
    "DeepSpeed's logger": "[2024-05-01 12:00:01,234] [ERROR] [launch.py:321:sigkill_handler] ",
    "a slashed date": "2024/05/01 12:00:01 ",
    "a runner's stream (accelerate test)": "stderr: ",
}


@pytest.mark.parametrize("label", sorted(LABELS))
def test_a_copys_labels_before_every_line_hide_no_line_and_name_no_rank(label: str) -> None:
    """A label no launcher writes a rank in: taken off every line, the verdict the log gets without it."""
    log = "\n".join([WAIT.format(r=1), WAIT.format(r=3), *TABLE.splitlines()])
    bare = assign_blame(analyze_text(log))
    labelled = assign_blame(analyze_text("\n".join(LABELS[label] + line for line in log.splitlines())))
    assert (labelled.culprits, labelled.suspects, labelled.nobody) == (bare.culprits, bare.suspects, bare.nobody)
    assert bare.culprits == [2]


def test_pytests_mark_a_glued_code_fence_and_rays_repeated_lines_are_taken_off() -> None:
    """pytest reports a failure's lines after ``E`` and the failing line's indent; a code fence glued
    to the first line; Ray's ``[repeated 3x across cluster]`` after a line another process wrote too."""
    spawned = [
        "``` E       torch.multiprocessing.spawn.ProcessRaisedException: ",
        "E       ",
        "E       -- Process 2 terminated with the following error:",
        "E       Traceback (most recent call last):",
        'E         File "/py/torch/multiprocessing/spawn.py", line 69, in _wrap',
        "E           fn(i, *args)",
        "E       torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB```",
    ]
    assert texts("\n".join(spawned))[4] == '  File "/py/torch/multiprocessing/spawn.py", line 69, in _wrap'
    verdict = assign_blame(analyze_text("\n".join(spawned)))
    assert alone(verdict) == [2] and "CUDA out of memory" in verdict.headline, "process 2's own error"
    assert texts("(WorkerDict pid=7) [rank1]: KeyError: 'x' [repeated 3x across cluster]") == ["[rank1]: KeyError: 'x'"]


# --- Ray's workers, a launcher's subprocess, torch 1.9's table --------------------------------------


def test_a_traceback_ray_says_more_processes_wrote_is_theirs_alike() -> None:
    """Ray folds the same lines of other processes into one's (``[repeated 3x across cluster]``): a traceback
    whose frames it folds so is as many processes failing in the same code, nobody's alone; the same traceback
    without the count is one process's, and a rank shown apart from it keeps it one process's too."""
    frames = [
        'File "/env/lib/python3.12/site-packages/trainer/parallel.py", line 120, in build_groups',
        "    group = new_group(ranks)",
        'File "/env/lib/python3.12/site-packages/trainer/parallel.py", line 88, in new_group',
        "    return Coordinator(ranks, backend)",
    ]
    label = "(Worker pid=4117) ERROR 03-02 10:42:30 [worker.py:27] "
    lines = [label + ("  " if line.startswith("File") else "") + line for line in frames]
    folded = [f"{line} [repeated 3x across cluster]" for line in lines]
    verdict = assign_blame(analyze_text("\n".join(folded)))
    assert verdict.nobody is not None and verdict.nobody.startswith("4 processes failed alike"), verdict.headline
    assert not verdict.culprits and not verdict.suspects
    assert assign_blame(analyze_text("\n".join(lines))).nobody is None, "one process's traceback, shown once"
    assert assign_blame(analyze_text("\n".join([*folded, WAIT.format(r=1)]))).nobody is None, "a rank waits apart"
    glued = f"{label}  {frames[0]}(Worker pid=4118) loading shard 3 [repeated 3x across cluster]"
    assert [w.repeated for w in lines_as_written(io.StringIO(glued))] == [0, 3], "the count is the last write's"


def test_rays_older_actor_error_and_a_worker_it_stopped_by_sigterm() -> None:
    """``RayActorError`` before Ray 2.9; a worker whose exit says it received SIGTERM was stopped from
    outside (Ray ending the job, the scheduler), not failed: where nothing else failed, nobody."""
    older = "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.\n"
    older += "\tname: xYzWorkerDict_0:2"
    assert [s.rank for s in assign_blame(analyze_text(older)).suspects] == [2]
    raylet = (
        "(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot "
        "the problem, check the logs for the dead worker. RayTask ID: ab Worker ID: cd Node ID: ef Worker IP address: "
        "10.0.0.3 Worker port: 40001 Worker PID: 5150 Worker exit type: SYSTEM_ERROR Worker exit detail: {detail}"
    )
    stopped = raylet.format(
        detail="Worker exits unexpectedly by a signal. SystemExit is raised (sys.exit is called). Exit code: 1. "
        "The process receives a SIGTERM."
    )
    verdict = assign_blame(analyze_text(stopped))
    assert verdict.nobody is not None and "a Ray worker (pid 5150) received SIGTERM" in verdict.nobody
    pieces = "\n".join(f"2024-05-01 12:00:0{n},000 - INFO - {stopped[n * 150 : n * 150 + 150]}" for n in range(4))
    said = assign_blame(analyze_text(pieces)).nobody
    assert said is not None and "pid 5150" in said, "a message a terminal wrapped, each piece stamped"
    died = raylet.format(detail="Worker unexpectedly exits with a connection error code 2. End of file.")
    assert assign_blame(analyze_text(f"{stopped}\n{died}")).nobody is None, "another died of something else"
    failed = "[rank1]: Traceback (most recent call last):\n[rank1]: RuntimeError: CUDA error: misaligned address\n"
    assert alone(assign_blame(analyze_text(failed + stopped))) == [1], "a rank that failed goes first"
    actor = (
        older + "\nThe actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
    )
    actor += "detail: Worker exits unexpectedly by a signal. The process receives a SIGTERM."
    assert assign_blame(analyze_text(actor)).suspects == [], "an actor stopped by SIGTERM is no suspect"


def test_a_launchers_called_process_error_says_a_worker_failed_not_which() -> None:
    """torch 1.x's launch.py raises with the command of its loop's last turn, whichever worker failed."""
    line = "subprocess.CalledProcessError: Command '['/usr/bin/python', '-u', 'train.py', '--local_rank={k}']' {how}."
    [exit] = read_launcher(line.format(k=3, how="returned non-zero exit status 1"))
    assert (exit.unit, exit.code) == (WORKER, 1)
    [exit] = read_launcher(line.format(k=0, how="died with <Signals.SIGKILL: 9>"))
    assert (exit.unit, exit.who, exit.code) == (LOCAL_RANK, 0, -9), "one worker: the one that failed"
    verdict = assign_blame(analyze_text(line.format(k=3, how="returned non-zero exit status 1")))
    assert verdict.suspects == [] and "the launcher says a worker ended by exit code 1, not which" in verdict.headline
    assert "the last it built" in verdict.headline
    launcher = "subprocess.CalledProcessError: Command '['/env/bin/deepspeed', '--num_gpus', '8', 'train.py']' died "
    said = assign_blame(analyze_text(launcher + "with <Signals.SIGKILL: 9>.")).headline
    assert "says a worker ended by signal 9 (SIGKILL)" in said and "the last it built" not in said, "accelerate's call"
    shell = (
        "subprocess.CalledProcessError: Command 'torchrun --nproc_per_node 8 train.py' returned non-zero exit status 1."
    )
    assert "the last it built" not in assign_blame(analyze_text(shell)).headline, "a command given as one string"


def test_torch_1_9s_table_and_a_root_cause_whose_exit_code_the_paste_cut() -> None:
    """torch 1.9-1.10 head their table ``Root Cause:`` and ``Other Failures:``, the signal in ``msg``; a
    failure the table times later than the root cause was torchrun's teardown; a root cause cut before
    its exit code still says who failed first, not how."""
    old = (
        "Root Cause:\n[0]:\n  time: 2021-10-20_19:48:10\n  rank: 2 (local_rank: 2)\n  exitcode: -9 (pid: 4242)\n"
        '  error_file: <N/A>\n  msg: "Signal 9 (SIGKILL) received by PID 4242"\n' + "=" * 40 + "\nOther Failures:\n"
        "[1]:\n  time: 2021-10-20_19:48:41\n  rank: 0 (local_rank: 0)\n  exitcode: -9 (pid: 4240)\n"
        '  error_file: <N/A>\n  msg: "Signal 9 (SIGKILL) received by PID 4240"\n' + "*" * 40
    )
    exits = read_launcher(old)
    assert [(e.who, e.code, e.first, e.signal) for e in exits] == [(2, -9, True, "SIGKILL"), (0, -9, False, "SIGKILL")]
    verdict = assign_blame(analyze_text(old))
    assert verdict.culprits == [2] and verdict.nobody is None, "rank 0 killed 31 s on: the teardown, not alike"
    cut = TABLE.replace("-15 (pid: 101)", "1 (pid: 101)").replace("10:00:07", "10:00:05").rsplit("  exitcode", 1)[0]
    verdict = assign_blame(analyze_text(cut))
    assert verdict.culprits == [] and [s.rank for s in verdict.suspects] == [2, 1]
    assert "how it ended is cut from the log" in verdict.suspects[0].why
    assert "in the same second (exit code 1)" in verdict.suspects[1].why


def test_spawns_join_raising_the_error_it_prints_is_no_process_of_its_own() -> None:
    join = (
        'Traceback (most recent call last):\n  File "/py/torch/multiprocessing/spawn.py", line 103, in join\n'
        "    raise Exception(msg)\nException: \n\n-- Process 1 terminated with the following error:\n"
        'Traceback (most recent call last):\n  File "/py/torch/multiprocessing/spawn.py", line 11, in _wrap\n'
    )
    facts = read_log(io.StringIO(join))
    assert facts.unplaced == [] and facts.raised[1].cut


# --- native crashes, shared memory, the set-up ----------------------------------------------------

UCX_BUS = """\
[node7:4242 :0:4250] Caught signal 7 (Bus error: nonexistent physical address)
==== backtrace (tid:   4250) ====
 0 0x0000000000012345 ncclShmOpen()  ???:0
 1 0x0000000000023456 ncclProxyService()  ???:0
 2 0x0000000000008609 start_thread()  ???:0
 3 0x000000000011f133 clone()  ???:0
================================="""


def test_a_bus_error_in_nccl_or_shared_memory_run_out_is_the_nodes() -> None:
    verdict = assign_blame(analyze_text(UCX_BUS))
    assert verdict.nobody is not None and "shared memory ran out" in verdict.nobody
    assert "process 4242 on node7 caught signal 7 (Bus error" in verdict.nobody
    for words in (
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
        "[rank1]: RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that "
        "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
        "node7:4242:4250 [1] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-Xy to 9637892 bytes",
    ):
        said = assign_blame(analyze_text(words)).nobody
        assert said is not None and "shared memory ran out" in said, words
    oom = "[rank2]: Traceback (most recent call last):\n[rank2]: torch.OutOfMemoryError: CUDA out of memory.\n"
    assert alone(assign_blame(analyze_text(oom + UCX_BUS))) == [2], "a rank's own failure goes first"


def test_a_crash_in_a_communication_librarys_own_thread_is_no_ranks_program() -> None:
    aborted = """\
[/pytorch/third_party/gloo/gloo/transport/uv/libuv.h:596] uv_accept: invalid argument
*** SIGABRT received at time=1700000000 on cpu 2 ***
PC: @     0x7f0000000001  (unknown)  raise
    @     0x7f0000000002  (unknown)  abort
    @     0x7f0000000003  (unknown)  gloo::transport::uv::Device::listenCallback()
    @     0x7f0000000004  (unknown)  uv__server_io"""
    verdict = assign_blame(analyze_text(aborted))
    assert verdict.nobody is not None and "SIGABRT in gloo's own thread (uv_accept: invalid argument)" in verdict.nobody
    segv = UCX_BUS.replace("signal 7 (Bus error: nonexistent physical address)", "signal 11 (Segmentation fault)")
    assert "in NCCL's own thread" in (assign_blame(analyze_text(segv)).nobody or "")
    program = "Fatal Python error: Segmentation fault\n\nThread 0x00007f (most recent call first):\n"
    program += '  File "/py/torch/distributed/distributed_c10d.py", line 3938 in barrier\n'
    assert assign_blame(analyze_text(program)).nobody is None, "the program's own thread: not the library's"


def test_a_crash_in_the_verbs_library_beneath_nccl_is_the_hosts_network_stack() -> None:
    """HPC-X's UCX prints each frame with its library's path; a frame of ibverbs under NCCL's, none of
    the program's, is the network stack's crash, on whatever thread NCCL probed it from. Frames as wide
    as each other are lines of their own, not one line a page wrapped."""
    nccl = "/home/u/envs/py/lib/python3.10/site-packages/torch/lib/../../nvidia/nccl/lib/libnccl.so.2"
    frames = [
        "/opt/hpcx/ucx/lib/libucs.so.0(ucs_handle_error+0x2a4)",
        "/lib/x86_64-linux-gnu/libibverbs.so.1(+0x14ba4)",
        "/lib/x86_64-linux-gnu/libibverbs.so.1(ibv_open_device+0x31)",
        *(f"{nccl}(+0x{offset:x})" for offset in (0x84825, 0x9F27C, 0x508AE)),
    ]
    crash = "Caught signal 11 (Segmentation fault: address not mapped to object at address 0x10)\n"
    crash += "==== backtrace (tid:   4250) ====\n"
    crash += "".join(f" {i}  {frame} [0x7f21{i:08x}]\n" for i, frame in enumerate(frames))
    [read] = read_log(crash.splitlines()).crashes.crashes
    assert read.frames[-1] == "libnccl.so.2(+0x508ae)", read.frames
    said = assign_blame(analyze_text(crash)).nobody
    assert (
        said is not None and "in the network's verbs library under NCCL (libibverbs.so.1(ibv_open_device+0x31))" in said
    )
    program = crash.replace(f"{nccl}(+0x508ae)", "/usr/bin/python3.10(_PyEval_EvalFrameDefault+0x5b9c)")
    assert assign_blame(analyze_text(program)).nobody is None, "beneath the program's own call: not the library's"


def test_torch_distributeds_checks_of_the_programs_set_up_fail_every_process_alike() -> None:
    for message in (
        "RuntimeError: trying to initialize the default process group twice!",
        "ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable RANK "
        "expected, but not set",
        "RuntimeError: Distributed package doesn't have NCCL built in",
    ):
        log = f'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n{message}'
        said = assign_blame(analyze_text(log)).nobody
        assert said is not None and "which every process runs alike" in said, message
        other = f"{log}\n[rank1]: Traceback (most recent call last):\n[rank1]: KeyError: 'label'"
        assert alone(assign_blame(analyze_text(other))) == [1], "another rank's own error goes first"
        ranked = "\n".join(f"[rank2]: {line}" for line in log.splitlines())
        assert assign_blame(analyze_text(ranked)).nobody is not None, "a rank's own line of it: the same"


def test_a_store_that_could_not_listen_on_its_port_is_the_set_up() -> None:
    for line in (
        "[rank0]: torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
        "address. port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use",
        "RuntimeError: Address already in use",
    ):
        said = assign_blame(analyze_text(line)).nobody
        assert said is not None and "another process held it" in said and "the set-up, not a rank" in said, line


RANK_LABELS = {
    "torchrun": "[rank{r}]:",
    "torchrun --tee, torch 1.9-2.1": "[default{r}]:",
    "Open MPI --tag-output": "[1,{r}]<stderr>:",
    "SageMaker's MPI": "[1,mpirank:{r},algo-1]<stderr>:",
    "horovodrun": "[{r}]<stderr>:",
    "MPICH, Intel MPI": "[{r}] ",
    "vLLM's worker": "(VllmWorker rank={r} pid=4{r}) ",
    "Lightning": "[rank: {r}] ",
    "a script's": "rank{r}: ",
    "srun, a task a rank": "{r}: ",
    "a stamp, then Open MPI": "2024-05-01 12:00:0{r},000 - INFO - [1,{r}]<stderr>:",
}
"""How launchers and programs put a line's rank before it."""
RANKS_SAID = [
    (0, "[E ProcessGroupNCCL.cpp:475] [Rank 0] " + WAIT.split("] [Rank {r}] ")[1].format(r=0)),
    (1, "Traceback (most recent call last):"),
    (1, '  File "train.py", line 88, in <module>'),
    (1, "    loss.backward()"),
    (2, "[E ProcessGroupNCCL.cpp:475] [Rank 2] " + WAIT.split("] [Rank {r}] ")[1].format(r=2)),
    (1, "RuntimeError: CUDA error: an illegal memory access was encountered"),
    (3, "[E ProcessGroupNCCL.cpp:475] [Rank 3] " + WAIT.split("] [Rank {r}] ")[1].format(r=3)),
]
"""Ranks 0, 2 and 3 time out in all-reduce #57 while rank 1 raises a CUDA error, interleaved."""


@pytest.mark.parametrize("label", sorted(RANK_LABELS))
def test_each_launchers_rank_label_names_the_rank_as_torchruns_does(label: str) -> None:
    log = "\n".join(RANK_LABELS[label].format(r=r) + line for r, line in RANKS_SAID)
    verdict = assign_blame(analyze_text(log))
    assert verdict.culprits == [1] and "rank 1 raised RuntimeError: CUDA error" in verdict.headline, verdict.headline


def test_ray_trains_worker_label_is_the_rank_its_list_of_workers_gives_the_pid() -> None:
    """Ray Train lists its workers at start (pid and world rank); each worker's lines carry its pid, not its rank."""
    pids = {0: 40102, 1: 40100, 2: 40103, 3: 40101}
    listed = "".join(
        f"(TorchTrainer pid=40050, ip=10.0.0.1) - (node_id=9f2c, ip=10.0.0.1, pid={pids[r]}) world_rank={r}, "
        f"local_rank={r}, node_rank=0\n"
        for r in range(4)
    )
    lines = "\n".join(f"(RayTrainWorker pid={pids[r]}, ip=10.0.0.1) {line}" for r, line in RANKS_SAID)
    head = "(TorchTrainer pid=40050, ip=10.0.0.1) Started distributed worker processes:\n"
    verdict = assign_blame(analyze_text(head + listed + lines))
    assert verdict.culprits == [1] and "rank 1 raised RuntimeError: CUDA error" in verdict.headline, verdict.headline
    assert 1 not in assign_blame(analyze_text(lines)).culprits, "no list: the pid names no rank"


def test_a_ray_drivers_traceback_of_a_task_is_the_rank_whose_pid_ray_train_lists() -> None:
    """Ray's driver prints a remote task's failure under ``RayTaskError(...): ray::... (pid=N, ...)``; Ray Train's list
    of its workers gives that pid its rank. Its own ``TrainingFailedError`` after it is the launcher's word."""
    listed = "".join(
        f"(TorchTrainer pid=40050) - (node_id=9f2c, ip=10.0.0.1, pid={40100 + r}) world_rank={r}, local_rank={r}, "
        "node_rank=0\n"
        for r in range(3)
    )
    driver = (
        "Traceback (most recent call last):\n"
        '  File "/venv/lib/python3.11/site-packages/ray/_private/worker.py", line 1053, in get_objects\n'
        "    raise value.as_instanceof_cause()\n"
        "ray.exceptions.RayTaskError(RuntimeError): ray::_RayTrainWorker__execute.get_next() (pid=40101, "
        "ip=10.0.0.1, actor_id=2238, repr=<RayTrainWorker>)\n"
        '  File "/job/train.py", line 18, in loop\n'
        '    raise RuntimeError("bad batch")\n'
        "RuntimeError: bad batch\n"
        "ray.train.TrainingFailedError: The Ray Train run failed. Please inspect the previous error messages.\n"
    )
    verdict = assign_blame(analyze_text(listed + driver))
    assert (verdict.culprits or alone(verdict)) == [1] and "rank 1 raised RuntimeError: bad batch" in verdict.headline
    assert 1 not in assign_blame(analyze_text(driver)).culprits, "no list: the pid names no rank"


def test_sruns_task_is_the_rank_only_where_the_lines_say_so() -> None:
    """``0: [rank3]:`` is torchrun under srun, a task a node: a traceback under ``0: `` is no rank's."""
    nodes = "\n".join(f"0: [rank{r}]:{line}" if "ProcessGroupNCCL" in line else f"0: {line}" for r, line in RANKS_SAID)
    verdict = assign_blame(analyze_text(nodes))
    assert verdict.culprits == [] and 1 not in verdict.culprits


def test_a_socket_nccl_could_not_connect_is_the_networks_set_up() -> None:
    for warn in (
        "node2:811:811 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.1<40393> failed : "
        "No route to host",
        "node2:811:811 [0] include/socket.h:409 NCCL WARN Connect to 10.0.0.1<40393> failed : Connection timed out",
        "node2:811:811 [0] NCCL WARN Bootstrap : no socket interface found",
    ):
        raised = "[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled "
        said = assign_blame(analyze_text(f"{warn}\n{raised}system error, NCCL version 2.18.1")).nobody
        assert said is not None and "NCCL_SOCKET_IFNAME" in said, warn
    oom = "[rank1]: torch.OutOfMemoryError: CUDA out of memory."
    assert alone(assign_blame(analyze_text(f"{warn}\n{oom}"))) == [1], "a rank's own failure goes first"


def test_ray_trains_list_of_the_workers_it_started_gives_the_world() -> None:
    """``- (ip=..., pid=...) world_rank=3, local_rank=1, node_rank=1``: a rank the log shows no line
    of is one the job has, suspected where its peers all wait."""
    started = "(TorchTrainer pid=50) Started distributed worker processes: \n" + "\n".join(
        f"(TorchTrainer pid=50) - (node_id=n, ip=10.0.0.{r // 2}, pid=5{r}) world_rank={r}, local_rank={r % 2}, "
        f"node_rank={r // 2}"
        for r in range(4)
    )
    waits = "\n".join(f"(RayTrainWorker pid=5{r}, ip=10.0.0.{r // 2}) {WAIT.format(r=r)}" for r in range(3))
    verdict = assign_blame(analyze_text(f"{started}\n{waits}"))
    assert verdict.nobody is None and [s.rank for s in verdict.suspects] == [3]


@pytest.mark.parametrize(
    "said",
    [
        "[d2.engine.launch]: Rank of current process: 0. World size: 4",  # detectron2
        "using world size: 4, data-parallel size: 4, context-parallel size: 1, tensor-model-parallel size: 1",
        "  world_size ...................................... 4",  # Megatron's arguments
        "2024/03/05 10:00:00 - mmengine - INFO -     GPU number: 4",
        "INFO:torch.distributed.distributed_c10d:Completed store-based barrier for key:store_based_barrier_key:1 with "
        "4 nodes.",
        "mpirun --host algo-1:2,algo-2:2 -np 4 --allow-run-as-root -x NCCL_DEBUG=INFO /opt/conda/bin/python train.py",
        "horovodrun -np 4 -H localhost:4 python train.py",
    ],
)
def test_the_world_as_a_framework_prints_it_makes_the_silent_highest_rank_a_suspect(said: str) -> None:
    """Ranks 0-2 wait; the framework's own words say the world has 4: rank 3, which no line shows, is where
    to look, not "every rank issued it"."""
    verdict = assign_blame(analyze_text("\n".join([said, *(WAIT.format(r=r) for r in range(3))])))
    assert verdict.nobody is None and [s.rank for s in verdict.suspects] == [3], verdict.headline


def test_every_rank_failing_alike_is_said_in_the_words_it_raised_and_nccls_connect_said_first() -> None:
    raised = (
        "[rank{r}]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317"
    )
    raised += ", unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5"
    both = "\n".join(raised.format(r=r) for r in (0, 1))
    said = assign_blame(analyze_text(both)).nobody
    assert said is not None and "distributed/c10d/NCCLUtils.hpp:317, unhandled system error" in said
    connect = "[rank0]: socketStartConnect: Connect to 192.168.1.12<43125> failed : Software caused connection abort"
    said = assign_blame(analyze_text(f"{both}\n{connect}")).nobody
    assert said is not None and said.startswith("the network between the processes")


def test_open_mpi_5s_process_name_and_mpichs_bad_termination_name_the_rank() -> None:
    prrte = (
        "prterun detected that one or more processes exited with non-zero status, thus causing\n"
        "the job to be terminated. The first process to do so was:\n\n"
        "   Process name: [prterun-gpu01-4242@1,3]\n   Exit code:    1\n"
    )
    [exit] = read_launcher(prrte)
    assert (exit.unit, exit.who, exit.code, exit.first) == (RANK, 3, 1, True)
    block = (
        "=" * 60 + "\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        "=   RANK 5 PID 4242 RUNNING AT gpu02\n=   KILLED BY SIGNAL: 9 (Killed)\n" + "=" * 60 + "\n"
    )
    [exit] = read_launcher(block)
    assert (exit.who, exit.code, exit.first) == (5, -9, True), "a block alone is the first failure"
    assert alone(assign_blame(analyze_text(block))) == [5]
    hydra = block + "=   RANK 2 PID 4239 RUNNING AT gpu01\n=   EXIT STATUS: 1\n"
    exits = read_launcher(hydra)
    assert [(e.who, e.code, e.first) for e in exits] == [(5, -9, False), (2, 1, False)], "one a rank, in no time order"
    verdict = assign_blame(analyze_text(hydra))
    assert verdict.culprits == [] and [s.rank for s in verdict.suspects] == [5, 2]
    assert "which rank first, it does not say" in verdict.suspects[0].why


def test_horovodruns_gloo_launcher_names_its_processes_by_rank() -> None:
    gloo = (
        "Process 2 exit with status code 1.\nProcess 0 exit with status code 143.\n"
        "RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus causing the job "
        "to be terminated. The first process to do so was:\nProcess name: 2\nExit code: 1\n"
    )
    exits = read_launcher(gloo)
    assert [(e.who, e.code, e.first, e.by) for e in exits][-1] == (2, 1, True, "horovodrun")
    assert assign_blame(analyze_text(gloo)).culprits == [2]


def test_slurm_cancelling_the_job_is_no_ranks_failure() -> None:
    """slurmstepd says why it stopped the job; the tasks it killed failed of nothing of their own. A step it
    cancelled for no reason it gives may be srun's own end of it after a task failed (a Slurm before 2025 says no
    more): no cancel from outside is proven; a reason on a later line (the job's) is the one."""
    killed = "srun: error: node1: tasks 0-3: Killed\nsrun: Force Terminated StepId=77.0"
    step = "slurmstepd: error: *** STEP 77.0 ON node1 CANCELLED AT 2024-05-01T12:00:00 {}***"
    job = "slurmstepd: error: *** JOB 77 ON node1 CANCELLED AT 2024-05-01T12:00:00 {}***"
    for cancel, words in ((step.format("DUE TO TIME LIMIT "), "its time limit ran out"), (job.format(""), "scancel")):
        said = assign_blame(analyze_text(f"{cancel}\n{killed}")).nobody
        assert said is not None and said.startswith("Slurm cancelled the job") and words in said, cancel
    bare = assign_blame(analyze_text(f"{step.format('')}\n{killed}"))
    assert bare.nobody is None and "scancel, or srun ending its tasks after one failed" in bare.headline
    preempted = assign_blame(analyze_text(f"{step.format('')}\n{killed}\n{job.format('DUE TO PREEMPTION ')}")).nobody
    assert preempted is not None and "preempted" in preempted, "the job's reason, given after the step's none"
    oom = "[rank2]: torch.OutOfMemoryError: CUDA out of memory."
    assert alone(assign_blame(analyze_text(f"{oom}\n{job.format('')}"))) == [2], "a rank that failed first goes first"


def test_a_node_slurm_lost_is_named_and_the_ranks_waiting_for_it_are_not_blamed() -> None:
    """srun names the node it lost; the ranks left waiting in a collective are its victims, and what to
    do is to keep the next run off that node. Without srun's line the node is not guessed (slurmstepd's
    ``ON node`` is where it runs, not the node that failed)."""
    waits = "\n".join(
        f"[rank{r}]:[E1206 10:00:01.000000 1{r} ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) "
        "ran for 600002 milliseconds before timing out."
        for r in (0, 1)
    )
    lost = "srun: error: Node failure on gpu-node-07"
    cancel = (
        "slurmstepd: error: *** STEP 4242.0 ON gpu-node-03 CANCELLED AT 2026-12-06T10:00:05 DUE TO NODE FAILURE ***"
    )
    for text in (f"{waits}\n{lost}", f"{waits}\n{lost}\n{cancel}"):
        said = assign_blame(analyze_text(text)).nobody
        assert said is not None and "a node of the job failed (gpu-node-07)" in said and "--exclude" in said, text
    said = assign_blame(analyze_text(f"{waits}\n{cancel}")).nobody
    assert said is not None and "a node of the job failed: the node" in said and "gpu-node-03" not in said


# --- what round 62's logs brought: the launchers' other words, each from the code that prints it ---------------


def test_mpiruns_sentence_over_two_lines_names_the_process_that_ended_the_job() -> None:
    """``orte_quit.c`` (and PRRTE's ``prte_quit.c``) names the one process that ended the job, in a help
    text whose sentence breaks where its version breaks it: killed by a signal, ``MPI_Abort`` called
    (its own failure, proven as the first), or exited without ``MPI_Finalize`` (suspected: how, it
    does not say)."""
    prrte = "prterun noticed that process rank 3 with PID 4242 on node gpu07 exited on\nsignal 9 (Killed).\n"
    [exit] = read_launcher(prrte)
    assert (exit.unit, exit.who, exit.code, exit.first) == (RANK, 3, -9, True)
    orterun = 'mpirun noticed that job rank 5 with PID 4242 on node "n2" exited on signal 11.'
    assert [(e.who, e.code) for e in read_launcher(orterun)] == [(5, -11)], "Open MPI 1.x's words"
    aborted = 'mpirun has exited due to process rank 6 with PID 77 on\nnode gpu02 calling "abort". This may have\n'
    [exit] = read_launcher(aborted)
    assert (exit.who, exit.aborted, exit.first) == (6, True, True)
    verdict = assign_blame(analyze_text(aborted))
    assert alone(verdict) == [6] and "ended the job itself: mpirun's first observed failure" in verdict.headline
    improper = (
        "prterun has exited due to process rank 2 with PID 91 on node gpu01 exiting\n"
        "improperly. There are three reasons this could occur:\n"
    )
    verdict = assign_blame(analyze_text(improper))
    assert verdict.culprits == [] and [s.rank for s in verdict.suspects] == [2]
    assert "exited without MPI_Finalize" in verdict.suspects[0].why
    nameless = "mpirun has exited due to process rank 1 with PID 5 on\nnode exiting improperly. There are three\n"
    assert [e.who for e in read_launcher(nameless)] == [1], "a node mpirun could not name"


def test_mpiruns_count_of_processes_that_returned_non_zero_names_none() -> None:
    """``errmgr_default_hnp.c`` counts them; which one, only the block it prints next says."""
    count = "Primary job  terminated normally, but 2 processes returned\nnon-zero exit codes. Per user-direction...\n"
    [exit] = read_launcher(count)
    assert (exit.unit, exit.count, exit.code) == (WORKER, 2, None)
    verdict = assign_blame(analyze_text("$ mpirun -np 2 python train.py\n" + count))
    assert verdict.culprits == verdict.suspects == [] and verdict.nobody is None
    assert "mpirun says 2 workers ended by a non-zero exit code, not which" in verdict.headline
    named = count + "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
    named += (
        "the job to be terminated. The first process to do so was:\n\n  Process name: [[4242,1],1]\n  Exit code: 3\n"
    )
    assert alone(assign_blame(analyze_text(named))) == [1], "the block after it names the first (the other alike?)"


def test_a_first_failure_by_sigabrt_is_the_ranks_own_abort_unless_ranks_timed_out() -> None:
    """A process aborts itself (a C++ exception, a failed check, a CUDA error its watchdog caught); its
    watchdog aborts it after a collective timed out too: where no rank's timeout is in the log, the rank
    a launcher saw abort first is suspected, never proven; beside timeouts, its abort is theirs."""
    noticed = "mpirun noticed that process rank 1 with PID 0 on node n1 exited on signal 6 (Aborted).\n"
    spawned = "torch.multiprocessing.spawn.ProcessExitedException: process 2 terminated with signal SIGABRT\n"
    lightning = "[rank: 3] Child process with PID 4242 terminated with code -6. Forcefully terminating all others\n"
    agent = "E0101 10:00:00.1 api.py:826] failed (exitcode: -6) local_rank: 4 (pid: 42) of binary: /usr/bin/python\n"
    for log, rank in ((noticed, 1), (spawned, 2), (lightning, 3), (agent, 4)):
        verdict = assign_blame(analyze_text(log))
        assert verdict.culprits == [] and [s.rank for s in verdict.suspects][:1] == [rank], log
        assert "an abort of its own" in verdict.suspects[0].why
        waits = "\n".join(WAIT.format(r=r) for r in (0, 5)) + "\n"
        beside = assign_blame(analyze_text(waits + log))
        assert all("abort of its own" not in s.why for s in beside.suspects) and not beside.culprits, log


def test_a_process_killed_by_an_illegal_instruction_is_the_build_or_the_platform() -> None:
    """SIGILL: the CPU met an instruction it lacks; every process runs the same binary. Not so a CUDA
    error of that name (a kernel's, on the rank's device)."""
    for log in (
        "mpirun noticed that process rank 0 with PID 0 on node mac exited on signal 4 (Illegal instruction: 4).",
        "  rank      : 3 (local_rank: 3)\n  exitcode  : -4 (pid: 12)\n  traceback : Signal 4 (SIGILL) received\n"
        + "=" * 40,
        "srun: error: node3: tasks 0-3: Illegal instruction",
        "*** SIGILL received at time=1712 on cpu 3 ***",
    ):
        said = assign_blame(analyze_text(log)).nobody
        assert said is not None and "illegal instruction (SIGILL)" in said, log
    device = "[rank2]:[E225 13:49:33.9 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 2] Process "
    device += "group watchdog thread terminated with exception: CUDA error: an illegal instruction was encountered"
    assert alone(assign_blame(analyze_text(device))) == [2]


def test_intel_and_mpich_hydra_say_a_process_ended_badly_in_their_own_ways() -> None:
    """MPICH's Hydra prints the first process its proxy found killed, by pid, its wait status as ``EXIT
    CODE`` (139: SIGSEGV with a core); no rank: the verdict says so and names none."""
    mpich = (
        "=" * 80 + "\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID 28488 RUNNING AT gpu4\n"
        "=   EXIT CODE: 139\n=   CLEANING UP REMAINING PROCESSES\n" + "=" * 80 + "\n"
    )
    [exit] = read_launcher(mpich)
    assert (exit.unit, exit.who, exit.code, exit.first) == (PROCESS, 28488, -11, True)
    verdict = assign_blame(analyze_text(mpich))
    assert verdict.culprits == verdict.suspects == []
    assert "a process (pid 28488 on gpu4) ended by signal 11 (SIGSEGV), as mpiexec says" in verdict.headline


def test_the_deepspeed_launchers_kills_count_its_workers() -> None:
    """``sigkill_handler`` says ``Killing subprocess`` once for each worker it started: one line is
    one worker, local rank 0, whether the line with its return code follows or the paste cut it;
    several say a worker failed, not which; a launcher itself signalled says so and ends them all."""
    kill = "[2023-05-20 12:09:28,633] [INFO] [launch.py:428:sigkill_handler] Killing subprocess {pid}\n"
    end = "[2023-05-20 12:09:29,1] [ERROR] [launch.py:434:sigkill_handler] ['python', 'x.py'] exits with return code"
    end += " = -11"
    for log in (kill.format(pid=51386), kill.format(pid=51386) + end):
        verdict = assign_blame(analyze_text(log))
        assert [s.rank for s in verdict.suspects] == [0], log
        assert "local rank 0" in verdict.suspects[0].why
    several = kill.format(pid=1) + kill.format(pid=2) + kill.format(pid=3)
    verdict = assign_blame(analyze_text(several))
    assert (
        verdict.suspects == [] and "killed its 3 workers; the line saying which is cut), not which" in verdict.headline
    )
    signalled = (
        several + "[2023-05-20 12:09:28,7] [INFO] [launch.py:437:sigkill_handler] Main process received SIGINT, exiting"
    )
    said = assign_blame(analyze_text(signalled)).nobody
    assert said is not None and "the deepspeed launcher itself received SIGINT: Ctrl-C" in said


def test_spawns_heading_names_the_process_it_found_failed_even_with_its_traceback_cut() -> None:
    """``-- Process 5 terminated with the following error:`` (``ProcessRaisedException``, or the bare
    ``Exception`` of torch 1.x) is spawn's join on the first process it found failed: where the paste
    cuts the traceback under it before a frame, the process is still the one suspected."""
    join = (
        'Traceback (most recent call last):\n  File "/py/torch/multiprocessing/spawn.py", line 119, in join\n'
        "    raise Exception(msg)\nException: \n\n-- Process 5 terminated with the following error:\n"
        "Traceback (most recent call last):\n"
    )
    verdict = assign_blame(analyze_text(join))
    assert verdict.culprits == [] and [s.rank for s in verdict.suspects] == [5]
    assert "process 5 ended by an exception" in verdict.suspects[0].why


def test_lightnings_launcher_names_the_child_it_found_ended_by_its_local_rank() -> None:
    """``_ChildProcessObserver`` logs the first child with a non-zero return code under ``[rank: i + 1]``:
    its local rank, the rank on one node; a prefix of Ray Tune's trial before it names no rank."""
    log = (
        "(_train_tune pid=2201) Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/4\n"
        "(_train_tune pid=2201) [rank: 2] Child process with PID 2250 terminated with code -9. Forcefully "
        "terminating all other processes to avoid zombies\n"
    )
    exits = read_log(io.StringIO(log)).exits
    assert [(e.unit, e.who, e.code) for e in exits] == [(LOCAL_RANK, 2, -9)]
    verdict = assign_blame(analyze_text(log))
    assert verdict.culprits == [] and [s.rank for s in verdict.suspects] == [2]
    assert "local rank 2 ended by signal 9 (SIGKILL), as Lightning's launcher says" in verdict.suspects[0].why


def test_torch_xlas_mesh_master_out_of_reach_is_the_set_up() -> None:
    """``mesh_service.cc``: a process that could not reach XRT's mesh master within its wait never
    joined; spawn's word that it exited is that, not a rank's fault."""
    log = "Failed to connect to client mesh master: tpu-host:8477\nException: process 1 terminated with exit code 17\n"
    said = assign_blame(analyze_text(log)).nobody
    assert said is not None and "could not reach torch_xla's mesh master at tpu-host:8477" in said
    assert "the set-up, not a rank" in said


def test_an_infiniband_adapters_fatal_event_is_its_nodes_and_an_old_completion_error_the_fabrics() -> None:
    """``net_ib``'s async thread reads the adapter's events: a fatal one (NCCL 2.4-2.22 by its name, 2.23+
    as such) is that node's adapter, as is its port going down; a port coming up or the GID table is no
    failure. A completion error of NCCL 2.4-2.11 names no peer, 2.27's its status by name: the fabric
    either way."""
    for line in (
        "node3:815:864 [0] transport/net_ib.cu:80 NCCL WARN NET/IB : Got async event : local catastrophic error",
        "node3:815:864 [0] NCCL WARN NET/IB : mlx5_2:1 async fatal event: local catastrophic error",
        "node3:815:864 [0] NCCL WARN NET/IB : mlx5_2:1 Got async event : local work queue catastrophic error",
        "node3:815:864 [0] transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : port error",
    ):
        said = assign_blame(analyze_text(f"[1,12]<stdout>:{line}")).nobody
        assert said is not None and said.startswith("the node's InfiniBand adapter or its link failed"), line
    quiet = "node3:815:864 [0] NCCL WARN NET/IB : mlx5_2:1 Got non-fatal async event: port active(9)"
    assert read_log(io.StringIO(quiet)).nccl.adapter is None
    down = "node3:815:864 [0] NCCL WARN NET/IB : mlx5_2:1 Got async event : port error\n"
    assert read_log(io.StringIO(down + down.replace("error", "active"))).nccl.adapter is None, "it came up again"
    elsewhere = down + down.replace("error", "active").replace("node3", "node4")
    assert read_log(io.StringIO(elsewhere)).nccl.adapter == "port error (mlx5_2 on node3)"
    for line in (
        "w-1:946:988 [0] transport/net_ib.cc:839 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, "
        "vendor err 129",
        "w-1:946:988 [0] NCCL WARN NET/IB: Got completion from peer 10.0.0.2<5486> with "
        "status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129",
    ):
        said = assign_blame(analyze_text(line)).nobody
        assert said is not None and "InfiniBand completion error 12" in said, line
    crashed = (
        "E1012 11:20:40.9 1 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -11) local_rank: "
        "5 (pid: 812) of binary: /usr/bin/python3\n"
    )
    assert assign_blame(analyze_text(crashed + line)).nobody is None, "a worker crashed: its peers' requests fail"


def test_nccls_lines_before_they_named_it_are_read_as_its_own() -> None:
    """NCCL 2.4 and 2.5 wrote ``WARN`` and ``INFO`` without its name after the process's prefix: a failed
    call's trace (``-> 2``) through the bootstrap is the transport's set-up failing, not a rank's; the
    same words without the process's prefix are no line of NCCL's."""
    log = (
        "gpu1:4410:4530 [2] include/socket.h:390 WARN Connection closed by remote peer\n"
        "gpu1:4410:4530 [2] INFO transport/net_socket.cu:160 -> 2\n"
        "gpu1:4410:4530 [2] INFO bootstrap.cu:40 -> 2 [Net]\n"
        "gpu1:4410:4530 [2] INFO init.cu:400 -> 2\n"
    )
    said = assign_blame(analyze_text(log)).nobody
    assert said is not None and "ncclSystemError in transport/net_socket.cu" in said
    facts = read_log(io.StringIO("worker INFO step.cc:12 -> 2\n"))
    assert facts.nccl.returned is None and not facts.nccl.processes


def test_a_pg_prefix_without_a_guid_is_its_id_and_a_watchdog_stuck_at_teardown_blames_nobody() -> None:
    """A build that sets no GUID prints ``[PG ID 0 PG GUID  Rank 3]``: group 0, the world's. A watchdog
    stuck after googletest's tear-down (every test ran) is the teardown hanging, not a rank held up;
    before the job's work ended, the absent ranks are suspected as ever."""
    stuck = (
        "[E929 22:14:53.1 ProcessGroupNCCL.cpp:1487] [PG ID 0 PG GUID  Rank 3] ProcessGroupNCCL's watchdog got "
        "stuck for 10 seconds without making progress in monitoring enqueued collectives."
    )
    said = watchdog_said(stuck)
    assert said is not None and (said.group, said.local) == ("0", 3)
    verdict = assign_blame(analyze_text("[----------] Global test environment tear-down\n" + stuck))
    assert verdict.nobody is not None and "the job's work had ended, so no rank held up another" in verdict.nobody
    assert assign_blame(analyze_text(stuck)).suspects, "a watchdog stuck mid-run still points at the others"


def test_a_process_exiting_as_its_watchdog_still_ran_is_no_failure() -> None:
    """torch logs ``main process destroyed cuda before watchdog loop exited`` at INFO as a process ends:
    CUDA says ``driver shutting down`` to the watchdog's last call. A rank's own failure beside it still
    goes first."""
    exiting = (
        "[I628 20:15:42.0 ProcessGroupNCCL.cpp:1501] [PG  Rank 1] main process destroyed cuda before watchdog "
        "loop exited, terminating watchdog. (Watchdog caught exception: CUDA error: driver shutting down"
    )
    said = assign_blame(analyze_text(exiting)).nobody
    assert said is not None and "was exiting" in said and "no rank failed" in said
    oom = "[rank2]: Traceback (most recent call last):\n[rank2]: torch.OutOfMemoryError: CUDA out of memory.\n"
    assert alone(assign_blame(analyze_text(oom + exiting))) == [2]


def test_ranks_that_lost_the_store_point_at_its_host_not_at_a_rank() -> None:
    """TCPStore's ``recvValue failed ... got 0 bytes``, the heartbeat's ``should dump`` flag it could not
    check: the store's server went away, so the process hosting it ended first; how, these lines do not
    say. The ranks that lost it are not suspected, nor is anyone cleared: rank 0, whose process creates
    the store (unless torchrun's agent holds it, on rank 0's node), is, proven nothing."""
    log = (
        '[rank2]:[W810 23:02:42.7 ProcessGroupNCCL.cpp:1826] [PG ID 0 PG GUID 0 Rank 2] Failed to check the "should '
        'dump" flag on TCPStore, (maybe TCPStore server has shut down too early), with error: Failed to recv\n'
        "[rank4]:[W810 23:02:42.9 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=102, addr=[n2]:50360, "
        "remote=[n1]:40027): Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server "
        "shutdown or crash?\n"
    )
    analysis = analyze_text(log)
    assert analysis.log.stores.lost == {2, 4} and analysis.log.peers.losses == []
    verdict = assign_blame(analysis)
    assert verdict.culprits == [] and verdict.nobody is None
    assert [s.rank for s in verdict.suspects][:1] == [0] and "store's usual host" in verdict.suspects[0].why
    assert {2, 4}.isdisjoint(s.rank for s in verdict.suspects)
    assert "ranks 2, 4 lost the c10d store at n1:40027" in verdict.headline
    lost_by_zero = log.replace("[rank2]:", "[rank0]:").replace("Rank 2]", "Rank 0]")
    assert all(s.rank != 0 for s in assign_blame(analyze_text(lost_by_zero)).suspects)


def test_a_ray_worker_killed_for_host_memory_is_the_rank_ray_trains_list_gives_its_pid() -> None:
    """Ray's memory monitor names the task it killed and its worker's pid; Ray Train's list of the
    workers it started gives each pid its rank. Without the list, the verdict says the worker by its
    pid and names no rank."""
    started = (
        "(TrainTrainable pid=1876) Started distributed worker processes:\n"
        "(TrainTrainable pid=1876) - (ip=10.0.0.2, pid=1942) world_rank=0, local_rank=0, node_rank=0\n"
        "(TrainTrainable pid=1876) - (ip=10.0.0.3, pid=1950) world_rank=1, local_rank=0, node_rank=1\n"
    )
    killed = (
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
        "Memory on the node (IP: 10.0.0.3, ID: 8515c7) where the task (actor ID: 4f48, name=RayTrainWorker.__init__, "
        "pid=1950, memory used=23.49GB) was running was 718.15GB / 755.24GB (0.950882), which exceeds the memory "
        "usage threshold of 0.95.\n"
    )
    verdict = assign_blame(analyze_text(started + killed))
    assert [s.rank for s in verdict.suspects][:1] == [1]
    assert "killed by Ray's memory monitor" in verdict.suspects[0].why
    verdict = assign_blame(analyze_text(killed))
    assert verdict.suspects == [] and "a Ray worker (pid 1950) was killed by Ray's memory monitor" in verdict.headline


def test_horovods_stall_list_under_its_header_is_no_sruns_label_and_may_wrap() -> None:
    """Unlabelled, ``0: [tensor, ...`` under ``Stalled ranks:`` is Horovod's rank 0, not srun's task 0
    (srun's own label stands before it, once); a list a terminal wrapped carries on over the next
    line."""
    log = (
        "[2020-03-24 04:54:54.2: W horovod/common/stall_inspector.cc:105] One or more tensors were submitted to be "
        "reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more than "
        "60 seconds.\nStalled ranks:\n2: [grads/AddN_1_0, \ngrads/AddN_2_0, grads/AddN_3_0 ...]\n"
    )
    stalls = read_log(io.StringIO(log)).horovod
    assert stalls.missing == {t: {2} for t in ("grads/AddN_1_0", "grads/AddN_2_0", "grads/AddN_3_0")}
    assert assign_blame(analyze_text(log)).culprits == [2]
    assert texts("3: Missing ranks:\n3: 2: [a, b]")[1] == "2: [a, b]", "srun's label once, then Horovod's rank"


def test_open_mpis_tag_before_a_cpp_terminate_labels_its_line_and_makes_no_write_of_its_own() -> None:
    [written] = lines_as_written(["[1,4]<stderr>:terminate called after throwing an instance of 'std::bad_alloc'"])
    assert written.text == "[rank4]:terminate called after throwing an instance of 'std::bad_alloc'"


def test_nccl_places_a_process_by_the_connections_it_sets_up_and_reads_a_warn_after_its_source_line() -> None:
    nccl = NcclLines()
    assert nccl.line("h:11:12 [1] NCCL INFO Channel 00/02 : 1[2000] -> 0[1000] via P2P/IPC")
    assert nccl.line("h:11:11 [1] enqueue.cc:9 NCCL WARN Cuda failure 'out of memory'")
    assert nccl.out_of_memory() == (1, "process 11 on h") and ("h", "11") in nccl.processes


def test_a_traceback_pasted_from_inside_keeps_its_frames_and_its_exception() -> None:
    facts = read_log(io.StringIO('  File "/w/a.py", line 3, in step\n    go()\nValueError: bad batch\n'))
    [raised] = facts.unplaced
    assert raised.type == "ValueError" and [f.func for f in raised.frames] == ["step"]


def test_a_year_a_later_line_gives_does_not_move_the_glog_stamps_read_before_it() -> None:
    """glog stamps give no year: those read before torchrun's table (``2024-05-01_12:10:05``) stand in this
    year, and so do those after it (the same log pasted twice), not two years apart."""

    def wait(r: int) -> str:
        return (
            f"[rank{r}]:[E501 12:10:03.1 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=4521, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for "
            "600012 milliseconds before timing out.\n"
        )

    table = "Root Cause (first observed failure):\n[0]:\n  time      : 2024-05-01_12:10:05\n"
    verdict = assign_blame(analyze_text(wait(0) + table + wait(1)))
    assert "for 10m00s" in verdict.headline, verdict.headline
