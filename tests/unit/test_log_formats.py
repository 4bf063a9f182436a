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

from distmon.forensics import distributed_debug, horovod, launcher_lines
from distmon.forensics.accounts import _Failure, _whom
from distmon.forensics.analysis import Analysis, analyze
from distmon.forensics.blame import assign_blame
from distmon.forensics.desync import MAX_REPORTS, DesyncLines
from distmon.forensics.distributed_debug import DebugChecks
from distmon.forensics.horovod import HorovodStalls
from distmon.forensics.launcher_lines import (
    LOCAL_RANK,
    PROCESS,
    RANK,
    SPAWNED,
    TASK,
    WORKER,
    LauncherLines,
    WorkerExit,
    task_list,
)
from distmon.forensics.logs import read_log
from distmon.forensics.nccl import NcclLines
from distmon.forensics.pasted import lines_as_written, unlabelled
from distmon.forensics.peers import CLOSED, FABRIC, PeerLines
from distmon.forensics.watchdog import op_family, watchdog_said


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


def read_launcher(text: str) -> list[WorkerExit]:
    exits: list[WorkerExit] = []
    lines = LauncherLines(exits.append)
    for line in text.splitlines():
        lines.line(line)
    lines.flush()
    return exits


def test_torchruns_table_gives_every_entry_and_its_root_cause() -> None:
    exits = read_launcher(TABLE)
    assert [(e.unit, e.who, e.code, e.first, e.signal) for e in exits] == [
        (RANK, 1, -15, False, "SIGTERM"),
        (RANK, 2, -9, True, "SIGKILL"),
    ]
    assert exits[1].killed and not exits[0].killed, "torchrun's own SIGTERM is its teardown"
    verdict = assign_blame(analyze_text(TABLE))
    assert verdict.culprits == [2] and "Signal 9 (SIGKILL)" in verdict.headline


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
    assert verdict.nobody is None and verdict.culprits == [3], "the process is rank 3, by pid and by rank"
    assert _whom([_Failure("rank 0"), _Failure("process 12")]) == "rank 0 and 1 process"
    assert _whom([_Failure("process 11"), _Failure("process 12")]) == "2 processes"


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


def test_the_reporting_rank_raised_no_fault_of_its_own() -> None:
    log = f"[rank1]: Traceback (most recent call last):\n[rank1]: {FINGERPRINT.format(a=1, b=3)}"
    facts = read_log(io.StringIO(log))
    assert facts.raised[1].consequence
    assert assign_blame(analyze_text(log)).culprits == [3]


def test_the_monitored_barrier_names_the_rank_that_never_answered() -> None:
    checks = DebugChecks()
    checks.line(
        "RuntimeError: Rank 2 successfully reached monitoredBarrier, but received errors while waiting for "
        "send/recv from rank 0. Please check rank 0 logs for faulty rank."
    )
    assert list(checks.unanswered) == [0]


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
    assert nccl.misuse == "ranks 1 and 5 both on CUDA device 1000", "the telling words win"
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
    assert verdict.culprits == [1], "a rank's own failure is not the fabric's"


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
    peers.line(
        "[E1206 TCPStore.cpp:180] [c10d] recvValue failed on SocketImpl(fd=62, addr=[node-a]:54838, "
        "remote=[node-b]:29500): failed to recv, got 0 bytes",
        0,
    )
    assert [(p.peer, p.how, p.witness) for p in peers.losses] == [
        ("10.0.0.2", CLOSED, 3),
        ("10.0.0.4", CLOSED, None),
        ("gpu-9.cluster", CLOSED, None),
        ("10.0.0.5", FABRIC, None),
        ("node-b", CLOSED, 0),
    ]
    assert peers.peers() == ["10.0.0.2", "10.0.0.4", "gpu-9.cluster", "node-b"] and not peers.fabric_only


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
    assert [s.rank for s in verdict.suspects][:1] == [0] and "its number not in the log" in verdict.headline
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
    assert assign_blame(analyze_text(one)).culprits == [1], "one rank out of memory is that rank's"


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
    one = "mpirun noticed that process rank 7 with PID 0 on node n1 exited on signal 9 (Killed)."
    assert texts(f"{one[:80]}\n{one[80:]}\n") == [one], "one line carrying on at a width terminals open at"
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
    ):
        [written] = lines_as_written([stamp + line])
        assert written.text == line and written.stamp.startswith("2024-05-01"), stamp
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
    assert assign_blame(
        analyze_text(head + "[rank1]: RuntimeError: \n[rank1]: CUDA error: unknown error")
    ).culprits == [1]


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

    reports = desync(*["- [0] Timeout at collective: ALLREDUCE, #7", "  #7 started ranks:"] * 100)
    assert len(reports.reports) == MAX_REPORTS and all(r.numbers == {7} for r in reports.reports)
    one = desync(
        "- [0] Timeout at collective: ALLREDUCE, #7", "  #7 started ranks:", *["    [0, 1, 3] started X"] * 500
    )
    assert one.reports[0].started == {7: {"X": {0, 1, 3}}}, "a rank listed twice is one rank"

    checks = DebugChecks()
    checks.line("Ranks 3, 2000000 failed to pass monitoredBarrier in 30 seconds")
    assert list(checks.unanswered) == [3]
    monkeypatch.setattr(distributed_debug, "MAX_RANKS", 4)
    checks.line("Ranks " + ", ".join(map(str, range(50))) + " failed to pass monitoredBarrier in 30 seconds")
    assert sorted(checks.unanswered) == [0, 1, 2, 3]
