"""The general readings of ``distmon analyze``, written once for every launcher and era rather than
a family at a time: which process ended first and how (each launcher's words as data), every
process failing alike, the environment refusing the job, a transport lost, NCCL's own failed
calls. Every line here is written as the code that prints it writes it, for these tests alone."""

from __future__ import annotations

import io
import signal
import tempfile
from pathlib import Path

import pytest

from distmon.forensics.analysis import Analysis, analyze
from distmon.forensics.blame import Blame, assign_blame
from distmon.forensics.environment import FAULTS, Environment
from distmon.forensics.evidence import evidence
from distmon.forensics.logs import read_log
from distmon.forensics.pasted import lines_as_written
from distmon.forensics.render import render_analysis
from distmon.forensics.worker_exits import PROCESS, RANK, WORKER
from tests.support.real_logs import read_launcher
from tests.support.verdicts import alone


def judged(text: str) -> Blame:
    return assign_blame(analyzed(text))


def analyzed(text: str) -> Analysis:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "job.log").write_text(text)
        return analyze([folder])


def suspects(verdict: Blame) -> list[int]:
    return [s.rank for s in verdict.suspects]


# --- which process ended first, and how: the launchers' words as data -----------------------

ENDS = [
    # a line as the launcher prints it, then (unit, who, code, first)
    ("Process 5 exit with status code 1.", (RANK, 5, 1, False)),
    ("node-7 || Process 2 exit with status code 139.", (RANK, 2, 139, False)),
    (
        "ERROR 2022-03-04 05:06:07,890 launch_utils.py:600] ABORT!!! Out of all 8 trainers, the trainer process "
        "with rank=[6] was aborted. Please check its log.",
        (RANK, 6, None, True),
    ),
    (
        "Container rank 3 status failed cmd ['/usr/bin/python', '-u', 'train.py'] code 2 log log/workerlog.3",
        (RANK, 3, 2, True),
    ),
    ("(TorchTrainer pid=4242) Worker 2 has failed.", (RANK, 2, None, True)),
    ("application called MPI_Abort(MPI_COMM_WORLD, 3) - process 5", (RANK, 5, 3, True)),
    ("Abort(1) on node 7 (rank 7 in comm 0): Fatal error in PMPI_Bcast: Other MPI error", (RANK, 7, 1, True)),
    ("command terminated with exit code 137", (WORKER, -1, 137, False)),
    ("AlgorithmError: ExecuteUserScriptError: ExitCode 1 ErrorMessage ...", (WORKER, -1, 1, False)),
    ("pdsh@head: node-3: ssh exited with exit code 1", (WORKER, -1, 1, False)),
    ("[launcher] Rank 6 (pid 4242) exited unexpectedly with exit code 3", (RANK, 6, 3, False)),
    ("ERROR:composer.cli.launcher:Rank 3 crashed with exit code -6.", (RANK, 3, -6, True)),
    ("[TensorRT-LLM][ERROR] Failed to initialize executor on rank 5: no attribute", (RANK, 5, None, True)),
    ("INFO:composer.cli.launcher:Killing global rank 3 (PID 3103) with SIGTERM", (RANK, 3, -15, False)),
    ("Killed", (WORKER, -1, -9, False)),
    ("Segmentation fault (core dumped)", (WORKER, -1, -11, False)),
    (
        "/var/spool/slurm/job7/slurm_script: line 12: 4242 Killed                  python train.py",
        (WORKER, -1, -9, False),
    ),
    ("[node-2:04242] Signal: Bus error (7)", (PROCESS, 4242, -7, False)),
    ("[4242] Signal: Segmentation fault (11)", (PROCESS, 4242, -11, False)),
    (
        "ERROR 07-04 17:35:16 [multiproc_executor.py:140] Worker proc VllmWorker-1 died unexpectedly, shutting down "
        "executor.",
        (RANK, 1, None, True),
    ),
    ("[123.4] Out of memory: Killed process 41235 (python) total-vm:1234kB", (PROCESS, 41235, -9, False)),
]


@pytest.mark.parametrize(("line", "said"), ENDS, ids=[line[:40] for line, _ in ENDS])
def test_each_launchers_words_on_a_worker_end_are_read_wherever_they_stand(
    line: str, said: tuple[str, int, int | None, bool]
) -> None:
    [end] = read_launcher(line)
    assert (end.unit, end.who, end.code, end.first) == said


def test_a_help_text_broken_over_two_lines_is_read_whole() -> None:
    """Open MPI's ``MPI_ABORT`` message breaks before its error code."""
    [end] = read_launcher("MPI_ABORT was invoked on rank 6 in communicator MPI_COMM_WORLD\nwith errorcode 4.\n")
    assert (end.unit, end.who, end.code, end.aborted, end.first) == (RANK, 6, 4, True, True)


def test_a_launchers_list_names_each_worker_and_a_first_only_alone() -> None:
    line = "Out of all 4 trainers, the trainer process with rank=[0, 2] was aborted. Please check its log."
    found = read_launcher(line)
    assert [(e.who, e.first) for e in found] == [(0, False), (2, False)]


def test_words_in_a_sentence_of_the_programs_own_are_no_end() -> None:
    """A shell's word is the whole line: a program's sentence that holds it ends nothing."""
    assert read_launcher("Killed 3 stale processes before training\nTerminated: no\nAborted run 12 resumed\n") == []


def test_the_name_of_the_first_process_may_follow_its_exit_code() -> None:
    """A collector may put the exit code's line before the name's (horovodrun's, Open MPI's block)."""
    text = "The first process to do so was:\nExit code: 3\nProcess name: 2\n"
    [end] = read_launcher(text)
    assert (end.unit, end.who, end.code, end.first) == (RANK, 2, 3, True)


def test_a_launchers_word_on_a_worker_it_does_not_name_under_a_ranks_label_is_that_ranks_end() -> None:
    """horovodrun runs each rank through ``kubectl exec`` on Kubernetes and labels what it says."""
    [end] = read_log(["[0]<stderr>:command terminated with exit code 137"]).exits
    assert (end.unit, end.who, end.code) == (RANK, 0, 137)
    [named] = read_log(["[executor][RANK 5] Failed to initialize executor on rank 5:"]).exits
    assert (named.unit, named.who, named.first) == (RANK, 5, True), "a word that names its rank keeps it"


def test_a_rank_only_a_launcher_names_is_said_so_not_lineless() -> None:
    said = render_analysis(analyzed("ERROR:composer.cli.launcher:Rank 2 crashed with exit code -6.\n"))
    assert "rank 2 (only Composer's launcher's word on how it ended)" in said


def test_a_signal_under_a_ranks_label_is_that_ranks_end() -> None:
    """Open MPI's handler and the shell write in the process's own output: Open MPI's tag names the rank."""
    facts = read_log(["[1,4]<stderr>:[n1:04242] Signal: Segmentation fault (11)", "[1,6]<stderr>:Killed"])
    assert sorted((e.unit, e.who, e.code) for e in facts.exits) == [(RANK, 4, -11), (RANK, 6, -9)]


def test_one_worker_a_launcher_found_failed_first_is_suspected_how_it_says() -> None:
    verdict = judged("Out of all 4 trainers, the trainer process with rank=[2] was aborted. Please check its log.\n")
    assert verdict.culprits == [] and suspects(verdict)[:1] == [2] and "was aborted" in verdict.headline


def test_a_rank_that_called_mpi_abort_is_proven_and_an_abort_with_code_0_is_no_failure() -> None:
    failed = judged("MPI_ABORT was invoked on rank 5 in communicator MPI_COMM_WORLD\nwith errorcode 2.\n")
    assert alone(failed) == [5]
    done = judged("MPI_ABORT was invoked on rank 5 in communicator MPI_COMM_WORLD\nwith errorcode 0.\n")
    assert done.culprits == [] and done.nobody is not None and "error code 0" in done.nobody


def test_a_bus_error_a_launcher_saw_first_is_suspected_not_proven() -> None:
    """A bus error is most often the node's shared memory run out, which its processes share."""
    verdict = judged("mpirun noticed that process rank 3 with PID 4242 on node n1 exited on signal 7 (Bus error).\n")
    assert verdict.culprits == [] and suspects(verdict)[:1] == [3] and "shared memory" in verdict.suspects[0].why


# --- every process failing alike ----------------------------------------------------------


def test_every_process_ended_by_the_same_signal_blames_nobody_however_each_launcher_says_it() -> None:
    """Exit status 139 (a shell's 128 + 11) and SIGSEGV are one end."""
    text = (
        "Process 1 exit with status code 139.\nProcess 3 exit with status code 139.\n"
        "[2]<stderr>:Segmentation fault (core dumped)\n"
    )
    verdict = judged(text)
    assert verdict.nobody is not None and "ranks 1-3 failed alike" in verdict.nobody and "SIGSEGV" in verdict.nobody


def test_ranks_signal_handlers_alike_clear_the_rank_mpirun_saw_first() -> None:
    handlers = "".join(f"[1,{r}]<stderr>:[n1:0100{r}] Signal: Segmentation fault (11)\n" for r in range(3))
    first = "mpirun noticed that process rank 1 with PID 0 on node n1 exited on signal 11 (Segmentation fault).\n"
    verdict = judged(handlers + first)
    assert verdict.culprits == [] and verdict.nobody is not None and "ranks 0-2 failed alike" in verdict.nobody
    assert alone(judged(first)) == [1]


def test_every_process_ended_by_a_bus_error_is_the_nodes_shared_memory() -> None:
    text = "".join(f"[1,{r}]<stderr>:[n1:0100{r}] Signal: Bus error (7)\n" for r in range(2))
    nobody = judged(text).nobody
    assert nobody is not None and "ranks 0-1 failed alike" in nobody and "shared memory" in nobody


def test_crash_reports_whose_labels_the_paste_cut_or_glog_prefixed_are_read() -> None:
    """UCX's handler with its ``[host:pid :0:tid]`` label cut away; glog's failure handler written
    through glog itself (Paddle), each of its lines behind glog's own prefix."""
    bare = "Caught signal 7 (Bus error: nonexistent physical address)\n" * 3
    nobody = judged(bare).nobody
    assert nobody is not None and "3 processes failed alike" in nobody and "shared memory" in nobody
    glog = "".join(
        f"W0102 03:04:05.{i}00000 {pid} init.cc:9] {line}\n"
        for i, (pid, line) in enumerate(
            (pid, line)
            for pid in (701, 702)
            for line in (
                '*** Aborted at 1700000000 (unix time) try "date -d @1700000000" if you are using GNU date ***',
                f"*** SIGSEGV (@0x0) received by PID {pid} (TID 0x7f) from PID 0; stack trace: ***",
            )
        )
    )
    nobody = judged(glog).nobody
    assert nobody is not None and "2 processes failed alike" in nobody and "SIGSEGV" in nobody
    assert judged("Caught signal 7 (Bus error: nonexistent physical address) in the test\n").nobody is None
    assert judged("Caught signal 15 (Terminated)\n" * 2).nobody is None, "a program's own word on a signal it caught"
    nested = "[n7:3039 :0:3095] Caught signal 11 (Segmentation fault: address not mapped to object at address (nil))"
    [crash] = read_log([nested]).crashes.crashes
    assert crash.signal == 11 and crash.said.endswith("at address (nil))"), "UCX's words end in a parenthesis too"


def test_the_cpp_runtimes_terminate_in_two_processes_alike_blames_nobody() -> None:
    """``terminate`` is said once a process: two of the same throw are two processes."""
    threw = "terminate called after throwing an instance of 'std::length_error'\n  what():  vector::reserve\n"
    verdict = judged(threw * 2)
    assert verdict.nobody is not None and "2 processes failed alike" in verdict.nobody


def test_a_terminate_over_a_collectives_error_is_no_crash_of_its_own() -> None:
    threw = (
        "terminate called after throwing an instance of 'std::runtime_error'\n"
        "  what():  [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, "
        "Timeout(ms)=600000) ran for 600100 milliseconds before timing out.\n"
    )
    assert read_log([*threw.splitlines()] * 2).crashes.crashes == []


def test_a_process_groups_teardown_on_its_own_cuda_error_names_its_rank() -> None:
    """torch 1.8-1.12's process group destructor aborts its NCCL communicators "on rank N": where
    the abort fails on a CUDA error (the sticky one of a kernel's own fault), that rank's CUDA work
    failed; where a peer was lost, the abort's error is no fault of its own."""
    own = (
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  NCCL error in: /src/c10d/NCCLUtils.hpp:99, unhandled cuda error, NCCL version 2.10.3\n"
        "Process Group destroyed on rank 3\n"
        "Exception raised from ncclCommAbort at /src/c10d/NCCLUtils.hpp:99 (most recent call first):\n"
    )
    verdict = judged(own)
    assert suspects(verdict) == [3], verdict
    assert "own CUDA error" in verdict.suspects[0].why and "unhandled cuda error" in verdict.suspects[0].why
    stood = render_analysis(analyzed(own + "[rank1]: epoch 3\n")).split("Where each rank stood:")[1]
    assert "rank 3: no evidence (no watchdog line in the log): it aborted (the teardown of its process group" in stood
    assert "rank 1: no evidence (no watchdog line in the log): its lines say nothing of where it stood" in stood
    assert "ranks 0, 2: no evidence (no line in the log): judged as never heard from" in stood
    labelled = "".join(f"[rank11]:{line}\n" for line in own.replace("on rank 3", "on rank 1").splitlines())
    [crash] = read_log(labelled.splitlines()).crashes.crashes
    assert crash.rank == 11 and "(rank 1 of it)" in crash.said, "a label's global rank, not the group's own"
    lost = own.replace("unhandled cuda error", "unhandled system error")
    assert read_log(lost.splitlines()).crashes.crashes == []
    assert read_log(own.replace("Process Group destroyed on rank 3", "").splitlines()).crashes.crashes == []


@pytest.mark.parametrize("word", ["Killed", "Aborted (core dumped)", "Terminated"])
def test_kills_and_aborts_are_no_sign_of_alike(word: str) -> None:
    """SIGKILL comes from outside for each process's own (the OOM killer's pick); SIGABRT follows
    another's failure as often as not (a watchdog, a peer lost); SIGTERM is a teardown."""
    text = f"[1,0]<stderr>:{word}\n[1,1]<stderr>:{word}\n"
    nobody = judged(text).nobody
    assert nobody is None or "alike" not in nobody


def test_every_worker_ended_by_sigterm_together_was_stopped_from_outside() -> None:
    text = "".join(f"2025-01-02 03:04:05 10.0.0.{w} [{w}] Terminated\n" for w in range(4))
    nobody = judged(text).nobody
    assert nobody is not None and "4 workers ended by SIGTERM" in nobody and "from outside" in nobody
    assert judged("Terminated\n").nobody is None


def test_a_path_the_file_system_refuses_alike_is_the_set_up_one_ranks_alone_is_its_own() -> None:
    def raised(who: str, message: str) -> str:
        lines = ["Traceback (most recent call last):", '  File "/w/prep.py", line 12, in load', "    open(p)", message]
        return "".join(f"{who}{line}\n" for line in lines)

    missing = "FileNotFoundError: [Errno 2] No such file or directory: '/shared/run7/shards.idx'"
    verdict = judged(raised("[rank2]: ", missing) + raised("[rank5]: ", missing))
    assert verdict.nobody is not None and verdict.nobody.startswith("ranks 2, 5 raised FileNotFoundError")
    assert "a file the program opens or creates is missing" in verdict.nobody
    frames = [f'  File "/w/{f}.py", line {n}, in {f}\n    {f}()' for n, f in ((3, "main"), (9, "build"), (5, "read"))]
    head = ["Traceback (most recent call last):", *"\n".join(frames).splitlines()]
    cut = "".join(f"[rank5]: {line}\n" for line in head)  # cut before it reached load
    full = "".join(
        f"[rank2]: {line}\n" for line in [*head, '  File "/w/load.py", line 12, in load', "    open(p)", missing]
    )
    assert judged(full + cut).nobody is not None, "one cut on the way to the same line"
    emptied = "OSError: [Errno 39] Directory not empty: '/cache/squad/0.0.0.incomplete'"  # a cache built at once
    assert judged(raised("", emptied)).nobody is not None
    said = render_analysis(analyzed(raised("", "FileExistsError: [Errno 17] File exists: '/run_locals'")))
    assert "NOBODY TO BLAME: a process raised FileExistsError" in said
    assert "your code: /w/prep.py:12 in load" in said, "where it raised is shown beside the verdict"
    assert alone(judged(raised("[rank3]: ", missing))) == [3], "one rank's alone: a path only it may open"
    segment = "".join(
        f"[rank3]: {line}\n"
        for line in (
            "Traceback (most recent call last):",
            '  File "/w/data.py", line 40, in __init__',
            "    shm = SharedMemory(name, True, size)",
            '  File "/usr/lib/python3.10/multiprocessing/shared_memory.py", line 104, in __init__',
            "    self._fd = _posixshmem.shm_open(",
            "FileExistsError: [Errno 17] File exists: '/000010_locals'",
        )
    )
    said = judged(segment).nobody
    assert said is not None and said.startswith("rank 3 raised FileExistsError"), "a segment's name is the node's"
    oom = raised("[rank1]: ", "torch.OutOfMemoryError: CUDA out of memory.")
    assert judged(raised("[rank2]: ", missing) * 2 + oom).nobody is None, "another failure of a rank's own"
    waits = "".join(
        f"[rank{r}]:[E1206 10:10:01.123456 22 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=51, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran "
        "for 600021 milliseconds before timing out.\n"
        for r in (0, 1, 3)
    )
    assert judged(raised("", missing) + waits).nobody is None, "a process's traceback the program may have caught"
    agent = (
        "E1206 10:00:01.000000 1234 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) "
        "local_rank: 1 (pid: 1112) of binary: /usr/bin/python\n"
    )
    assert judged(raised("", missing) + agent).nobody is None, "a worker killed besides: a failure of its own"


def test_an_error_of_the_programs_own_code_is_every_ranks_not_the_one_a_paste_shows() -> None:
    def raised(who: str, message: str, frame: str = '  File "/w/train.py", line 40, in build') -> str:
        lines = ["Traceback (most recent call last):", frame, "    check(cfg)", message]
        return "".join(f"{who}{line}\n" for line in lines)

    config = "ValueError: tensor_parallel_size (3) must divide num_attention_heads (32)"
    verdict = judged(raised("[rank5]: ", config))
    assert verdict.culprits == [] and verdict.nobody is not None
    assert verdict.nobody.startswith("rank 5 raised ValueError: tensor_parallel_size (3) must divide")
    assert "an error of the program's own code or configuration, which every rank runs alike" in verdict.nobody
    said = render_analysis(analyzed(raised("", "AttributeError: 'Config' object has no attribute 'lr_warmup'")))
    assert "NOBODY TO BLAME: a process raised AttributeError" in said
    assert "your code: /w/train.py:40 in build" in said, "where it raised is shown beside the verdict"
    devices = (
        "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cpu and cuda:1!"
    )
    assert judged(raised("[rank1]: ", devices) + raised("[rank0]: ", devices)).nobody is not None
    for reducer in (
        "RuntimeError: Expected to mark a variable ready only once. This error is caused by one of the following "
        "reasons: 1) Use of a module parameter outside the `forward` function.",
        "RuntimeError: Your training graph has changed in this iteration, e.g., one parameter is used in first "
        "iteration, but then got unused in the second iteration.",
    ):
        assert judged(raised("[rank3]: ", reducer)).nobody is not None, "a model DDP's reducer cannot follow"
    capturing = (
        "[E ProcessGroupNCCL.cpp:830] [Rank 10] NCCL watchdog thread terminated with exception: CUDA error: "
        "operation not permitted when stream is capturing\n"
    )
    assert judged(capturing).nobody is not None, "a CUDA graph captured around what may not be: every rank's"
    registry = "".join(
        f"[rank1]: {line}\n"
        for line in (
            "Traceback (most recent call last):",
            '  File "/venv/lib/python3.8/site-packages/detectron2/data/catalog.py", line 51, in get',
            "    f = self[name]",
            '  File "/usr/lib/python3.8/collections/__init__.py", line 1010, in __getitem__',
            "    raise KeyError(key)",
            "KeyError: 'coco_2017_trian'",
        )
    )
    assert judged(registry).nobody is not None, "a name looked up in a registry: no sample of a rank's own"
    fetched = registry.replace("detectron2/data/catalog.py", "w/shards.py").replace(", in get", ", in __getitem__")
    assert alone(judged(fetched)) == [1], "a dataset's __getitem__ looking its sample up: the rank's own sample"
    assert alone(judged(raised("[rank2]: ", "RuntimeError: CUDA error: an illegal memory access"))) == [2]
    batch = '  File "/venv/lib/python3.11/site-packages/torch/utils/data/_utils/fetch.py", line 52, in fetch'
    assert alone(judged(raised("[rank3]: ", "KeyError: 'image'", batch))) == [3], "a sample of its own shard"
    missing = "ValueError: File data/shards.json not found."
    assert alone(judged(raised("[rank4]: ", missing))) == [4], "a path: the file system's rule, not this one"
    other = raised(
        "[rank6]: ", "TypeError: unsupported operand type(s) for +: 'int' and 'str'", '  File "/w/a.py", line 9, in f'
    )
    assert judged(raised("[rank5]: ", config) + other).nobody is None, "two errors in two places: not one program's"
    waits = "".join(
        f"[rank{r}]:[E1206 10:10:01.123456 22 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=51, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran "
        "for 600021 milliseconds before timing out.\n"
        for r in (1, 2, 3)
    )
    assert judged(raised("[rank0]: ", config) + waits).culprits == [0], "the others waited: they did not raise it"
    lost = raised("[rank1]: ", "RuntimeError: [pair.cc:598] Connection closed by peer [10.0.0.2]:14004")
    assert judged(raised("[rank0]: ", config) + lost).culprits == [0], "another lost it: it did not raise it"
    went_on = "[rank1]: step 1203 | loss 2.1797\n"
    assert judged(raised("[rank0]: ", config) + went_on).culprits == [0], "another went on: it did not raise it"
    nan = "AssertionError: loss is NaN at step 5123"
    assert alone(judged(raised("[rank2]: ", nan))) == [2], "numbers not finite: its data or its GPU, perhaps"
    reader = '  File "/w/shards.py", line 88, in __next__'
    assert alone(judged(raised("[rank3]: ", "KeyError: 'jpg'", reader))) == [3], "a sample its own reader fetched"
    killed = "[123456.789] Out of memory: Killed process 41235 (python) total-vm:1234kB, anon-rss:987kB\n"
    assert judged(raised("[rank0]: ", config) + killed).nobody is None, "the kernel killed a process besides"
    in_collective = "".join(
        f"[rank1]: {line}\n"
        for line in (
            "Traceback (most recent call last):",
            '  File "/w/train.py", line 97, in train_step',
            '  File "/venv/torch/distributed/distributed_c10d.py", line 2501, in all_reduce',
        )
    )
    assert judged(raised("[rank0]: ", config) + in_collective).culprits == [0], "another cut waiting in a collective"
    agent = (
        "E1206 10:00:01.000000 1234 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) "
        "local_rank: 1 (pid: 1112) of binary: /usr/bin/python\n"
    )
    assert judged(raised("[rank0]: ", config) + agent).nobody is None, "a worker killed besides: a failure of its own"


def test_ranks_cut_in_the_same_code_as_another_ranks_failure_failed_alike() -> None:
    def traceback(rank: int, frames: list[tuple[str, int, str]], message: str | None) -> str:
        lines = ["Traceback (most recent call last):"]
        lines += [f'  File "{file}", line {line}, in {func}' for file, line, func in frames]
        return "".join(f"[rank{rank}]: {line}\n" for line in lines + ([message] if message else []))

    step = [("/w/train.py", 67, "<module>"), ("/w/loop.py", 30, "train"), ("/w/loop.py", 51, "step")]
    backward = [*step, ("/venv/lib/python3.11/site-packages/torch/_tensor.py", 626, "backward")]
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 388.00 MiB."
    verdict = judged(traceback(0, step, None) + traceback(2, backward, oom))
    assert verdict.nobody is not None and verdict.nobody.startswith("ranks 0, 2 failed alike (torch.OutOfMemory")
    framed = render_analysis(analyzed(traceback(0, step, None) + f"[rank2]: {oom}\n"))
    assert "ranks 0, 2 failed alike (torch.OutOfMemoryError" in framed, "the error's frames cut, not its line"
    assert "where it raised (its exception line cut):" in framed and "your code: /w/loop.py:51 in step" in framed
    assert judged(traceback(0, step, None) + traceback(2, backward, None)).nobody is None, "no failure seen: waiters?"
    ecc = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
    gpu = judged(traceback(0, step, None) + traceback(2, backward, ecc))
    assert gpu.nobody is None and 2 in gpu.culprits, "a GPU's fault: its own"
    shallow = traceback(0, step[:2], None) + traceback(2, backward, oom)
    assert judged(shallow).nobody is None, "cut at the script's first frames: on the path of any error"
    table = "\n".join(
        [
            "Root Cause (first observed failure):",
            "[0]:",
            "  time      : 2026-12-06_10:00:01",
            "  host      : gpu-a",
            "  rank      : 2 (local_rank: 2)",
            "  exitcode  : 1 (pid: 4242)",
            "Other Failures:",
            "[1]:",
            "  time      : 2026-12-06_10:00:02",
            "  host      : gpu-a",
            "  rank      : 0 (local_rank: 0)",
            "  exitcode  : -15 (pid: 4240)",
            "",
        ]
    )
    torn_down = traceback(0, step, None) + traceback(2, backward, oom) + table
    assert judged(torn_down).nobody is None, "the launcher ended rank 0 (SIGTERM): it did not fail of its own"
    waiting = [*step, ("/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", 2501, "all_reduce")]
    assert judged(traceback(0, waiting, None) + traceback(2, backward, oom)).culprits == [2], "cut while waiting"
    elsewhere = [("/w/train.py", 67, "<module>"), ("/w/eval.py", 12, "evaluate")]
    assert judged(traceback(0, elsewhere, None) + traceback(2, backward, oom)).nobody is None, "another place"
    assert judged(traceback(0, step, None)).nobody is None, "one rank's cut traceback alone: its own"
    waits = (
        "[rank1]:[E1206 10:10:01.123456 22 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=51, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600021 "
        "milliseconds before timing out.\n"
    )
    assert judged(traceback(0, step, None) + traceback(2, backward, oom) + waits).nobody is None, "a rank waited"


def test_under_torchruns_agent_srun_task_is_a_nodes_launcher_said_apart() -> None:
    """torchrun's agent names local rank 1; srun's task 1 is a node's launcher, not rank 1 again."""
    agent = (
        "E1206 10:00:01.000000 1234 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) "
        "local_rank: 1 (pid: 1112) of binary: /usr/bin/python\n"
    )
    verdict = judged(agent + "srun: error: node-1: task 1: Killed\n")
    assert suspects(verdict) == [1] and "as torchrun says" in verdict.suspects[0].why
    assert "srun says task 1, the launcher on node-1, ended by signal 9" in verdict.headline


def test_a_rank_first_in_its_group_waits_for_a_rank_after_it_not_before() -> None:
    """Rank 4 is its tensor-parallel group's rank 0 (torch numbers a group's members in order): its peers are
    after it, so the world has a rank 5 and ranks 0-3, in no group with it, are not suspected."""
    said = "[PG ID 2 PG GUID 3(TENSOR_MODEL_PARALLEL_GROUP) Rank {local}]"
    line = (
        "[rank{rank}]:[E1124 03:12:44.123456789 ProcessGroupNCCL.cpp:632] {said} Watchdog caught collective operation"
        " timeout: WorkNCCL(SeqNum=5653, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600060"
        " milliseconds before timing out."
    )
    analysis = analyzed(line.format(rank=4, said=said.format(local=0)))
    assert analysis.world == 6 and suspects(assign_blame(analysis)) == [5]
    analysis = analyzed(line.format(rank=4, said=said.format(local=1)))  # the group's second: one before it
    assert analysis.world == 5 and suspects(assign_blame(analysis)) == [0, 1, 2, 3]


def test_kubectls_table_of_pods_is_no_wrapped_line_and_its_oomkilled_pod_is_named() -> None:
    """Its rows are as wide as each other, as a terminal's wrap would leave them: they are a table's (columns
    apart), each a line; the pod the kernel killed for its container's memory limit is named."""
    table = [
        "NAME                 READY   STATUS      RESTARTS   AGE",
        "bert-master-0        0/1     Error       0          31m",
        "bert-worker-0        0/1     Error       0          31m",
        "bert-worker-1        0/1     OOMKilled   0          31m",
    ]
    assert [w.text for w in lines_as_written(line + "\n" for line in table)] == table
    [ended] = read_log(io.StringIO("\n".join(table))).exits
    assert (ended.unit, ended.host, ended.by) == (WORKER, "bert-worker-1", "Kubernetes")


def test_a_rank_whose_last_wrapped_collective_is_behind_the_others_is_suspected() -> None:
    """TORCH_DISTRIBUTED_DEBUG=DETAIL logs each collective as a rank starts it: rank 1's last is #3
    where ranks 0 and 2 run #4: it issued fewer collectives (suspected: a paste may cut its later lines)."""

    def wrapped(rank: int, seq: int, shape: int) -> str:
        return (
            f"[I ProcessGroupWrapper.cpp:562] [Rank {rank}] Running collective: CollectiveFingerPrint(SequenceNumber="
            f"{seq}, OpType=BROADCAST, TensorShape=[{shape}], TensorDtypes=Long)\n"
        )

    verdict = judged(wrapped(1, 3, 1) + wrapped(0, 4, 73) + wrapped(2, 4, 73))
    assert not verdict.culprits and suspects(verdict)[:1] == [1]
    assert "its last collective is BROADCAST #3 of [1] where ranks 0, 2 run BROADCAST #4 of [73]" in verdict.headline
    assert not suspects(judged(wrapped(1, 3, 1) + wrapped(0, 4, 73))), "one against one: which is behind, unsaid"


def test_a_rank_announced_twice_and_others_by_none_is_the_launch() -> None:
    """Two nodes each told they are the first start the same global ranks; the others never come."""
    text = "".join(f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/4\n" for r in (0, 1, 0, 1))
    nobody = judged(text).nobody
    assert nobody is not None and "ranks 0-1 announced by two processes each, 2 of 4 by none" in nobody
    restart = "".join(f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/2\n" for r in (0, 1, 0, 1))
    assert judged(restart).nobody is None


# --- the environment refusing the job -----------------------------------------------------

REFUSALS = [
    "ValueError: host not found: Name or service not known",
    "ssh: Could not resolve hostname job-worker-3.job: Temporary failure in name resolution",
    "n1:42:42 [0] transport/p2p.cc:1 NCCL WARN Cuda failure 217 'peer access is not supported between these two'",
    "ImportError: libnccl.so.2: cannot open shared object file: No such file or directory",
    "ModuleNotFoundError: No module named 'apex'",
    "ORTE was unable to reliably start one or more daemons.",
    "node1: ssh: connect to host node2 port 22: Connection refused",
    "node2: trainer@node2: Permission denied (publickey,password).",
    "subprocess.CalledProcessError: Command 'ssh -o PasswordAuthentication=no 10.1.0.9 hostname' returned non-zero "
    "exit status 255.",
    "[INFO] [runner.py:400:main] cmd = pdsh -w n1,n2 python -m deepspeed.launcher.launch --node_rank=%n "
    "--master_addr= --master_port=29500 train.py",
    "train.py: error: unrecognized arguments: --local-rank=3",
    "usage: train.py [-h] [--config CONFIG] [--lr LR]",
    "n2:31:31 [0] init.cc:981 NCCL WARN Invalid rank requested : 8/8",
    "There are not enough slots available in the system to satisfy the 16",
    "It looks like MPI_INIT failed for some reason; your parallel process is",
    "RuntimeError: Gloo connectFullMesh failed with [pair.cc:144] no error",
    "n1:42:42 [0] NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory",
    "ORTE has lost communication with a remote daemon.",
    "The worker group startup timed out after 60.0 seconds waiting for 4 workers.",
    "The node with node id: abc and ip: 10.0.0.3 has been marked dead because the detector has missed too many "
    "heartbeats from it.",
    "The instance gpu-node-4 was preempted by the cloud provider.",
    "The node was low on resource: memory. Container trainer was using 60Gi, which exceeds its request of 32Gi.",
    "=>> PBS: job killed: walltime 3610 exceeded limit 3600",
    "RuntimeError: No CUDA GPUs are available: no CUDA-capable device is detected",
    "gpu9:515:515 [1] NCCL WARN Cuda failure 'no kernel image is available for execution on the device'",
    "UserWarning: NVIDIA H100 with CUDA capability sm_90 is not compatible with the current PyTorch installation.",
    "RuntimeError: the installed CUDA driver does not support the fabric memory handles this collective asks for",
    "node-3:77:90 [2] transport/net_ib.cc:1200 NCCL WARN NET/IB : req 1/2 tag 7 peer 10.1.0.4<4242> collective "
    "mismatch error, local size 1024 remote size 2048",
    "srun: error: Unable to allocate resources: Invalid partition name specified",
    "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
    "[rank1]: RuntimeError: grad_scale is too small, exiting: 2.3283064365386963e-10",
    "2024-01-14 01:03:00,826 WARNING [train.py:1057] (2/4) Grad scale is small: 1.2924697071141057e-26",
    "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding.",
    "RuntimeError: use_libuv was requested but PyTorch was build without libuv support",
    "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use "
    "the 'spawn' start method",
    "RuntimeError: DDP expects same model across all ranks, but Rank 3 has 291 params, while rank 0 has inconsistent "
    "0 params.",
    "[rank1]: RuntimeError: DDP expects same model across all ranks, but Rank 1 has 291 params, while rank 0 has "
    "inconsistent 289 params.",
    "RuntimeError: disagreement between rank0 and rank3: rank0: [7321, 8840, 1022], rank3: [7321, 1022, 8840]",
]


def test_each_kind_of_refusal_has_a_line_here() -> None:
    assert {fault.what for fault in FAULTS} <= {
        f.what for line in REFUSALS for f in FAULTS if f.pattern.search(line) is not None
    }


def test_a_refusal_that_keeps_a_job_from_starting_is_none_once_its_ranks_ran() -> None:
    """An empty master address, ssh refusing the launcher: the launch's, in each form a launcher or
    torchrun says it; not where the ranks had completed collectives (the address was not used, or
    not that one), nor another program's key refused (git's, to its host)."""
    waits = "".join(
        f"[rank{r}]:[E510 09:50:01.1 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=512, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600100 "
        "milliseconds before timing out.\n"
        for r in (0, 1, 2)
    )
    command = "+ torchrun --nnodes=2 --node_rank=1 --master_addr= --master_port=29500 train.py\n"
    assert "no master address" in str(judged(command).nobody)
    assert judged(command + waits + "[rank3]: step 511 done\n").nobody is None
    for said in (
        "ValueError: The hostname of the rendezvous endpoint ':29500' must be a dot-separated list of labels, an "
        "IPv4 address, or an IPv6 address.",
        "+ torchrun --nnodes=2 --master_addr '' --master_port=29500 train.py",
    ):
        assert "no master address" in str(judged(said + "\n").nobody), said
    ssh = "CalledProcessError: Command 'ssh -o PasswordAuthentication=no -p 2222 n2 hostname' returned non-zero exit "
    assert "could not reach every node" in str(judged(ssh + "status 255.\n").nobody)
    assert judged("[rank0]: git@github.com: Permission denied (publickey).\n").nobody is None


def test_a_usage_is_argparses_refusal_only_at_a_lines_start() -> None:
    """argparse prints its usage, then its error, when it refuses a command line: a paste cut
    before the error still shows the refusal; a program's own word on usage is none."""
    assert judged("Print the usage: train.py [-h] to see options\n").nobody is None


@pytest.mark.parametrize("line", REFUSALS, ids=[line[:40] for line in REFUSALS])
def test_a_refusal_of_the_environment_blames_nobody_and_says_what_to_check(line: str) -> None:
    nobody = judged(line + "\n").nobody
    assert nobody is not None and "not a rank: check" in nobody


def test_nccls_peer_access_refusal_is_what_a_ranks_nccl_error_says_again() -> None:
    refusal = "n1:3216:3291 [1] misc/utils.cu:120 NCCL WARN Cuda failure 'peer access is not supported between these'\n"
    error = (
        "[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error\n"
    )
    nobody = judged(refusal + error).nobody
    assert nobody is not None and "peer-to-peer" in nobody


def test_horovods_word_on_nccls_failed_set_up_is_nccls_error_not_the_ranks() -> None:
    """Horovod names NCCL's call that failed (``ncclCommInitRank failed: unhandled system error``): as
    torch's ``NCCL error``, a peer lost or the network as the communicator set up, not the rank's own."""
    log = (
        "[1,0]<stdout>:n1:3215:3283 [0] include/socket.h:390 WARN Connection closed by remote peer\n"
        "[1,0]<stdout>:n1:3215:3283 [0] INFO transport/net_socket.cu:160 -> 2\n"
        "[1,0]<stderr>:horovod.common.exceptions.HorovodInternalError: ncclCommInitRank failed: unhandled system "
        "error\n"
    )
    verdict = judged(log)
    assert not verdict.culprits and verdict.nobody is not None and "ncclSystemError" in verdict.nobody


def test_a_refusal_beside_a_ranks_own_error_blames_the_rank() -> None:
    oom = "[rank3]: Traceback (most recent call last):\n[rank3]: torch.OutOfMemoryError: CUDA out of memory.\n"
    assert alone(judged(oom + REFUSALS[0] + "\n")) == [3]


def test_a_warning_is_no_refusal() -> None:
    """An optional extension a warning says it could not load refuses nothing."""
    environment = Environment()
    assert not environment.line("UserWarning: Failed to load image Python extension: libjpeg.so: cannot open shared")
    assert environment.met == []


@pytest.mark.parametrize(
    "warn",
    [
        "init.cc:88 NCCL WARN Cuda failure 'named symbol not found'",
        "init.cc:90 NCCL WARN Cuda failure 'operation not supported'",
        "enqueue.cc:7 NCCL WARN Cuda failure 'invalid resource handle'",
        "transport/nvls.cc:7 NCCL WARN Cuda failure 1 'invalid argument'",
    ],
)
def test_a_cuda_call_of_nccls_the_set_up_refuses_blames_nobody_though_a_rank_raised_nccls_error(warn: str) -> None:
    """CUDA's words for what the build, the driver or the GPU lack: every process of the set-up meets them, and
    the rank whose NCCL error the log shows says the same refusal again."""
    raised = (
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "/w/job.py", line 9, in <module>\n'
        "[rank0]:     dist.all_reduce(t)\n"
        "[rank0]: torch.distributed.DistBackendError: NCCL error in: /w/NCCLUtils.cpp:7, unhandled cuda error\n"
    )
    verdict = judged(f"gpu3:7001:7019 [0] {warn}\n{raised}")
    assert verdict.culprits == [] and verdict.nobody is not None
    assert "the build, the driver or the GPU" in verdict.nobody


def test_nccls_cuda_failure_beside_a_ranks_own_error_of_another_kind_blames_the_rank() -> None:
    warn = "gpu3:7001:7019 [0] init.cc:88 NCCL WARN Cuda failure 'operation not supported'\n"
    oom = "[rank2]: Traceback (most recent call last):\n[rank2]: torch.OutOfMemoryError: CUDA out of memory.\n"
    assert alone(judged(warn + oom)) == [2]


def test_torchs_warning_that_the_gpu_is_not_in_its_build_is_the_set_up_though_a_process_raised_after() -> None:
    """Python prints a warning's source line after it: torch's capability check's own line says it too."""
    lines = (
        "/env/torch/cuda/__init__.py:9: UserWarning:\n"
        "  warnings.warn(incompatible_device_warn.format(device_name, capability, arch_list, device_name))\n"
        "-- Process 1 terminated with the following error:\n"
        "Traceback (most recent call last):\n"
        '  File "/w/train.py", line 40, in worker\n'
        "    dist.barrier()\n"
    )
    verdict = judged(lines)
    assert verdict.nobody is not None and "not one the installed torch was built for" in verdict.nobody


def test_nccls_out_of_memory_suspects_the_rank_its_process_connects_as() -> None:
    """NCCL's send set-up prints ``Channel 00 : 2[...] -> 0[...]`` from the process of rank 2."""
    channels = "".join(
        f"box:{900 + r}:{950 + r} [{r}] NCCL INFO Channel 00 : {r}[{r}000] -> {(r + 1) % 3}[{(r + 1) % 3}000] via P2P\n"
        for r in range(3)
    )
    oom = "box:902:902 [2] enqueue.cc:5 NCCL WARN Cuda failure 'out of memory'\n"
    verdict = judged(channels + oom)
    assert verdict.culprits == [] and suspects(verdict)[:1] == [2]
    assert "NCCL found its GPU out of memory (process 902 on box" in verdict.suspects[0].why
    two = channels + "box:902:950 [2] NCCL INFO Channel 01 : 0[0] -> 1[1000] via P2P\n"  # two ranks: which is not said
    assert suspects(judged(two + oom))[:1] != [2]
    also = "box:900:900 [0] enqueue.cc:5 NCCL WARN Cuda failure 'out of memory'\n"  # rank 0's too: not one rank's
    assert suspects(judged(channels + oom + also))[:1] != [2]


def test_a_timeout_as_ddp_is_built_is_the_set_up() -> None:
    """DDP's constructor broadcasts rank 0's parameters: the group's first collective, which every rank issues;
    a paste may begin inside the traceback."""
    lines = (
        '  File "/env/torch/nn/parallel/distributed.py", line 30, in __init__\n'
        "    self._sync_module_states(module)\n"
        '  File "/env/torch/nn/parallel/distributed.py", line 80, in _sync_module_states\n'
        "    broadcast(tensors)\n"
        "RuntimeError: Timed out after 1800 seconds\n"
    )
    verdict = judged(lines)
    assert verdict.nobody is not None and "as DistributedDataParallel was built" in verdict.nobody
    later = lines.replace("in __init__", "in forward")
    assert judged(later).nobody is None


def placing_oom(rank: int, message: str) -> str:
    """A rank's traceback running out of GPU memory as it moves the model onto its GPU."""
    return (
        f"[rank{rank}]: Traceback (most recent call last):\n"
        f'[rank{rank}]:   File "/w/run.py", line 5, in <module>\n'
        f"[rank{rank}]:     model.to(device)\n"
        f'[rank{rank}]:   File "/env/torch/nn/modules/module.py", line 900, in _apply\n'
        f"[rank{rank}]:     param_applied = fn(param)\n"
        f"[rank{rank}]: torch.OutOfMemoryError: CUDA out of memory. {message}\n"
    )


HELD_MOST = (
    "Tried to allocate 216.00 MiB. GPU 0 has a total capacity of 44.42 GiB of which 118.12 MiB is free. Including "
    "non-PyTorch memory, this process has 44.29 GiB memory in use."
)
HELD_LITTLE = (
    "Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity; 1.20 GiB already allocated; 3.00 MiB free; "
    "1.50 GiB reserved in total by PyTorch)"
)


@pytest.mark.parametrize(
    "lines",
    [
        placing_oom(1, "Tried to allocate 2.00 GiB.") + placing_oom(2, "Tried to allocate 2.00 GiB."),
        placing_oom(1, HELD_MOST),
    ],
    ids=["two ranks", "one rank holding its GPU"],
)
def test_running_out_of_memory_as_the_model_is_placed_is_the_set_up_not_the_rank(lines: str) -> None:
    verdict = judged(lines)
    assert verdict.culprits == [] and verdict.nobody is not None and "moving the model onto its GPU" in verdict.nobody
    training = judged(lines.replace("in _apply", "in forward"))
    assert alone(training) == [1] if "rank2" not in lines else "failed alike" in (training.nobody or "")


@pytest.mark.parametrize(
    "message", ["Tried to allocate 2.00 GiB.", HELD_LITTLE], ids=["its figures not shown", "holding little of its GPU"]
)
def test_one_rank_out_of_memory_placing_the_model_is_not_proof_the_model_is_too_large(message: str) -> None:
    """A GPU another process holds (a stale one, two ranks given one GPU) fails the same way on one rank."""
    verdict = judged(placing_oom(1, message))
    assert verdict.nobody is None and alone(verdict) == [1]


def test_a_ranks_cpp_abort_over_its_own_error_under_open_mpis_tag_suspects_it() -> None:
    """Open MPI tags every write: the tag before ``terminate`` is the rank's label, not another write."""
    lines = (
        "[1,6]<stderr>:terminate called after throwing an instance of 'std::runtime_error'\n"
        "[1,6]<stderr>:  what():  cudaStreamSynchronize failed: an illegal memory access was encountered\n"
        "[1,6]<stderr>:[n4:3131] *** Process received signal ***\n"
        "[1,6]<stderr>:[n4:3131] Signal: Aborted (6)\n"
    )
    verdict = judged(lines)
    assert verdict.culprits == [] and suspects(verdict)[:1] == [6]
    assert "terminate called after throwing std::runtime_error" in verdict.suspects[0].why


def test_nccls_failed_call_in_its_transport_blames_nobody_and_a_ranks_own_error_still_goes_first() -> None:
    trace = "n1:42:43 [0] NCCL INFO transport/net.cc:515 -> 2\nn1:42:43 [0] NCCL INFO init.cc:1090 -> 2\n"
    nobody = judged(trace).nobody
    assert nobody is not None and "ncclSystemError in transport/net.cc" in nobody
    oom = "[rank1]: Traceback (most recent call last):\n[rank1]: torch.OutOfMemoryError: CUDA out of memory.\n"
    assert alone(judged(oom + trace)) == [1]


def node_b_lost(how: str) -> str:
    """Two nodes of two ranks, NCCL's lines placing each rank and its host's address; ranks 0-1 on node a then
    say ``how`` of node b's address."""
    hosts = "".join(
        f"[rank{r}]:node-{'ab'[r // 2]}:4{r}:4{r} [{r % 2}] NCCL INFO Bootstrap : Using eth0:10.0.0.{1 + r // 2}<0>\n"
        f"[rank{r}]:node-{'ab'[r // 2]}:4{r}:9{r} [{r % 2}] NCCL INFO comm 0x5581a00{r}e0 rank {r} nranks 4 cudaDev "
        f"{r % 2} busId {r + 1}0000 - Init COMPLETE\n"
        for r in range(4)
    )
    return hosts + "".join(f"[rank{r}]:node-a:4{r}:30{r} [{r}] {how}\n" for r in (0, 1))


def test_a_peer_lost_by_its_address_is_the_host_nccls_lines_show_using_it() -> None:
    """Ranks 0-1 lost their connection to 10.0.0.2, the address node b's ranks bootstrapped on: node b's ranks
    are suspected, the host named with its address; NCCL's trace of the call (``-> 6``, ncclRemoteError: a peer
    gone) does not make it the network's."""
    closed = "misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer 10.0.0.2<50120>"
    for trace in ("", "\nnode-a:40:300 [0] NCCL INFO transport/net.cc:1302 -> 6"):
        verdict = judged(node_b_lost(closed + trace))
        assert verdict.nobody is None and suspects(verdict) == [2, 3], verdict.headline
        assert "on node-b (10.0.0.2), the peer whose connection closed" in verdict.suspects[0].why


def test_infiniband_errors_all_from_one_peer_whose_ranks_went_silent_suspect_its_ranks_not_the_link() -> None:
    """Every completion error names node b, whose ranks' lines stop at start-up: its processes went away (the
    work requests to them fail alike). Where node b's ranks wait too, the link between them is what failed."""
    error = "transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<54862> with status=12"
    verdict = judged(node_b_lost(error + " opcode=0 len=0 vendor err 129"))
    assert verdict.nobody is None and suspects(verdict) == [2, 3], verdict.headline
    assert "the one peer every InfiniBand completion error names" in verdict.suspects[0].why
    waits = "".join(
        f"[rank{r}]:[E1206 10:00:01.0 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600012 "
        "milliseconds before timing out.\n"
        for r in (2, 3)
    )
    nobody = judged(node_b_lost(error + " opcode=0 len=0 vendor err 129") + waits).nobody
    assert nobody is not None and "InfiniBand completion error 12" in nobody


def test_one_process_driving_every_gpu_holds_up_no_rank() -> None:
    """nccl-tests' ``-g 4``: its ranks are threads of one process."""
    table = "".join(f"#  Rank {r} Group  0 Pid  4242 on   node1 device  {r} [0x0{r}] GPU\n" for r in range(4))
    nobody = judged(table).nobody
    assert nobody is not None and "process 4242 on node1, driving GPUs 0, 1, 2, 3" in nobody
    apart = "".join(f"#  Rank {r} Group  0 Pid  424{r} on   node1 device  {r} [0x0{r}] GPU\n" for r in range(4))
    assert judged(apart).nobody is None
    aborted = (  # one rank's process: its proxy thread on its GPU 3, torch's watchdog aborting on device 0
        "gpu-a7:51234:51299 [3] NCCL INFO [Service thread] Connection closed by localRank 3\n"
        "gpu-a7:51234:51260 [0] NCCL INFO comm 0x5571c2d0 rank 3 nranks 4 cudaDev 3 busId 61000 - Abort COMPLETE\n"
    )
    assert "driving GPUs" not in (judged(aborted).nobody or "")


# --- a transport lost, Slurm's and srun's words -------------------------------------------


def test_a_transport_lost_in_a_log_that_names_no_rank_is_the_network_or_the_peers_host() -> None:
    lost = "RuntimeError: [gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.1.2.3]:4242\n"
    nobody = judged(lost).nobody
    assert nobody is not None and "the connection to 10.1.2.3 was lost" in nobody
    named = "[rank1]:RuntimeError: [gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.1.2.3]:4242\n"
    verdict = judged(named + "[rank1]:Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2\n")
    assert verdict.nobody is None and suspects(verdict) == [0]


def test_a_cancel_after_a_task_failed_is_sruns_teardown_and_the_task_is_suspected() -> None:
    text = (
        "slurmstepd: error: Detected 1 oom-kill event(s) in step 7.0 cgroup.\n"
        "srun: error: n3: task 2: Out Of Memory\n"
        "srun: Terminating job step 7.0\n"
        "slurmstepd: error: *** STEP 7.0 ON n3 CANCELLED AT 2025-01-02T03:04:05 ***\n"
    )
    verdict = judged(text)
    assert verdict.nobody is None and suspects(verdict)[:1] == [2]
    assert judged("\n".join(text.splitlines()[2:]) + "\n").nobody is None  # srun ended the step: no scancel
    bare = judged(text.splitlines()[-1] + "\n")  # srun's teardown, as likely as scancel: no one proven
    assert bare.nobody is None and "scancel, or srun" in bare.headline


def test_a_step_cancelled_over_a_task_failure_suspects_the_task_srun_did_not_end() -> None:
    """srun ends the others with SIGTERM and lists them; the task it leaves out is the one that failed."""
    cancel = "slurmstepd: error: *** STEP 9.0 ON n1 CANCELLED AT 2025-01-02T03:04:05 DUE TO TASK FAILURE ***\n"
    verdict = judged(cancel + "srun: error: n1: tasks 0-4,6-15: Terminated\n")
    assert verdict.nobody is None and suspects(verdict) == [5]
    assert "not among the 15 tasks srun ended" in verdict.suspects[0].why
    assert suspects(judged("srun: error: n1: tasks 0-4,6-15: Terminated\n")) == [5], "the cancel's line cut"
    assert judged("srun: error: n1: tasks 0-15: Terminated\n").nobody is not None, "every task torn down"
    assert judged(cancel + "srun: error: n1: tasks 0-3,8-15: Terminated\n").suspects == [], "too many left out"
    assert judged("srun: error: n1: tasks 0,999999999: Terminated\n").suspects == [], "counted before listed"
    time_limit = cancel.replace("TASK FAILURE", "TIME LIMIT")
    assert "time limit" in (judged(time_limit + "srun: error: n1: tasks 0-15: Terminated\n").nobody or "")


def test_srun_tasks_one_per_rank_ended_together_on_a_node_others_wait_for_are_that_nodes_ranks() -> None:
    """srun started a task a rank (its ``-l`` labels are the ranks): tasks 4-7 of node1 ended together while
    ranks 0-3 of node0 wait in a collective for them. The world holds the tasks; node1's ranks are suspected
    together, whether killed (the step's out-of-memory kills beside) or ended by the same exit code."""
    waits = "".join(
        f"{r}: [E501 12:10:40.{r}00000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=4521, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for "
        "600012 milliseconds before timing out.\n"
        for r in range(4)
    )
    oom = "slurmstepd: error: Detected 4 oom_kill events in StepId=81234.0. Some of the step tasks have been OOM "
    oom += "Killed.\n"
    killed = judged(waits + oom + "srun: error: node1: tasks 4-7: Killed\n")
    assert killed.nobody is None and suspects(killed) == [4, 5, 6, 7] and killed.leading == [4, 5, 6, 7]
    assert "srun tasks 4-7 on node1 ended by signal 9 (SIGKILL)" in killed.suspects[0].why
    assert "Detected 4 oom_kill events" in killed.suspects[0].why
    exited = judged(waits + "srun: error: node1: tasks 4-7: Exited with exit code 1\n")
    assert exited.nobody is None and exited.leading == [4, 5, 6, 7], "waited for: not every rank's failure"
    everywhere = judged(
        "srun: error: node0: tasks 0-3: Exited with exit code 1\nsrun: error: node1: tasks 4-7: "
        "Exited with exit code 1\n"
    )
    assert everywhere.nobody is not None and "failed alike" in everywhere.nobody, "nobody waits: every rank's"


# --- first works, teardowns, a bar still running ------------------------------------------


def test_a_batch_of_sends_and_receives_that_is_a_groups_first_work_is_the_set_up() -> None:
    """A batch (``batch_isend_irecv``) runs on the group's own communicator, as a collective does."""
    line = (
        "[rank9]:[E101 01:02:03.000000000 ProcessGroupNCCL.cpp:685] [Rank 3] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=1, OpType=COALESCED, NumelIn=0, NumelOut=0, Timeout(ms)=600000) ran for 600500 "
        "milliseconds before timing out.\n"
        "[rank9]:[E101 01:02:03.000000000 ProcessGroupNCCL.cpp:2251] [PG ID 4 PG GUID 40(PIPELINE) Rank 3]  failure "
        "detected by watchdog at work sequence id: 1 PG status: last enqueued work: 1, last completed work: -1\n"
    )
    nobody = judged(line).nobody
    assert nobody is not None and "first collective never completed" in nobody


def test_a_watchdog_hang_after_every_process_reached_its_exit_is_the_teardown() -> None:
    exits = "".join(
        f"[rank{r}]:[W101 01:02:0{r}.0 ProcessGroupNCCL.cpp:1538] Warning: WARNING: destroy_process_group() was "
        "not called before program exit, which can leak resources.\n"
        for r in range(3)
    )
    hang = (
        "[rank1]:[F101 01:20:00.0 ProcessGroupNCCL.cpp:1614] [PG ID 2 PG GUID 7 Rank 1] Terminating the process "
        "after attempting to dump debug info, due to ProcessGroupNCCL watchdog hang.\n"
    )
    nobody = judged(exits + hang).nobody
    assert nobody is not None and "the job's work had ended" in nobody


def test_a_bar_still_running_beside_a_watchdogs_timeout_frames_suspects_the_rank_its_words_name() -> None:
    text = (
        "Scoring on rank=2:  40%|####      | 2/5 [03:00<04:30, 90.0s/it]\n"
        "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<long>) + 0x1d2 (0x1 in libtorch.so)\n"
    )
    verdict = judged(text)
    assert verdict.culprits == [] and suspects(verdict)[:1] == [2] and "progress bar" in verdict.suspects[0].why


# --- the store, NCCL's sockets, pastes ----------------------------------------------------


def test_a_client_that_failed_to_connect_to_the_store_is_the_set_up() -> None:
    line = "torch.distributed.DistNetworkError: The client socket has failed to connect to [head]:29500 (errno: 113)"
    nobody = judged(line + "\n").nobody
    assert nobody is not None and "could not reach the c10d store at head:29500" in nobody


def test_a_ranks_timeout_for_the_dataloaders_shared_seed_waited_for_rank_0() -> None:
    line = "[rank3]:RuntimeError: Timed out receiving the shared seed from the distribtued store on Rank 3\n"
    verdict = judged(line)
    assert verdict.culprits == [] and suspects(verdict)[:1] == [0]


def test_nccls_socket_that_would_not_connect_is_the_network() -> None:
    line = "n2:42:42 [0] misc/socket.cc:1 NCCL WARN socketPollConnect: connect returned Connection refused, exceeded"
    nobody = judged(line + "\n").nobody
    assert nobody is not None and "NCCL could not connect (Connection refused)" in nobody


def test_nccls_socket_retried_to_the_logs_end_with_no_communicator_set_up_is_the_network() -> None:
    """NCCL 2.8-2.18 retries a refused connection at INFO: three retries with no communicator set up after them
    are a connection never made (the paste taken as the job hung there); a communicator set up after, or a retry
    or two, say nothing."""
    retry = "gpu7:4242:4300 [0] NCCL INFO Call to connect returned Connection refused, retrying\n"
    nobody = judged(retry * 3).nobody
    assert nobody is not None and "NCCL retried its connection 3 times (Connection refused) and, as far" in nobody
    assert judged(retry * 2).nobody is None
    done = "gpu7:4242:4242 [0] NCCL INFO comm 0x5d1 rank 1 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n"
    assert judged(retry * 3 + done).nobody is None
    aborted = "gpu7:4242:4250 [0] NCCL INFO comm 0x5d1 rank 1 nranks 2 cudaDev 0 busId 1000 - Abort COMPLETE\n"
    assert "NCCL retried its connection 3 times" in (judged(retry * 3 + aborted).nobody or ""), "aborted, not set up"


def test_open_mpis_tag_before_each_fragment_of_a_line_is_taken_off() -> None:
    """Open MPI tags each write of a process: a line written in pieces carries the tag within it."""
    [written] = lines_as_written(["[1,3]<stderr>:[[1,3]<stderr>:horovod[1,3]<stderr>:] stalled"])
    assert written.text == "[rank3]:[horovod] stalled"


def test_a_collectors_columns_are_taken_off() -> None:
    lines = ["<info>    [2025-01-02 03:04:05] 0a1b2c3d || Process 2 exit with status code 1.", "master.0 -- x"]
    assert [w.text for w in lines_as_written(lines)] == ["Process 2 exit with status code 1.", "x"]


def test_rank_0s_monitored_barrier_names_who_never_came_over_those_that_waited_for_its_answer() -> None:
    """Rank 0 answers a monitored barrier only once every rank came: those that came and got no
    answer say so of rank 0 (suspected: it may wait itself), whose own report names the rank that never came."""
    came = (
        "[E ProcessGroupGloo.cpp:138] Rank 1 successfully reached monitoredBarrier, but received errors while "
        "waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.\n"
    )
    alone = judged(came)
    assert alone.culprits == [] and [s.rank for s in alone.suspects] == [0]
    named = came + "[E ProcessGroupGloo.cpp:138] [Rank 0]: Rank 3 failed to pass monitoredBarrier in 30000 ms\n"
    assert judged(named).culprits == [3]


def test_a_monitored_barrier_of_a_subgroup_names_ranks_of_that_group_not_of_the_job() -> None:
    """Global rank 4 is rank 0 of its group: the rank 3 it names is its group's, which the log does
    not map to the job's; nor is the rank 0 that a rank that came waited for the job's rank 0."""
    root = "[rank4]:[E ProcessGroupGloo.cpp:138] [Rank 0]: Rank 3 failed to pass monitoredBarrier in 30000 ms\n"
    came = (
        "[rank5]:[E ProcessGroupGloo.cpp:138] Rank 1 successfully reached monitoredBarrier, but received errors "
        "while waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.\n"
    )
    for lines in (root, came, came + root):
        verdict = judged(lines)
        assert 3 not in verdict.culprits and 0 not in verdict.culprits and 0 not in suspects(verdict), lines
    world = "[rank0]:[E ProcessGroupGloo.cpp:138] [Rank 0]: Rank 3 failed to pass monitoredBarrier in 30000 ms\n"
    assert judged(world).culprits == [3]
    called = (
        "[rank0]:Traceback (most recent call last):\n"
        '[rank0]:  File "/job/train.py", line 88, in <module>\n'
        "[rank0]:    dist.monitored_barrier(group=dp_group, timeout=timedelta(seconds=30))\n"
        "[rank0]:RuntimeError: [Rank 0]: Rank 1 failed to pass monitoredBarrier in 30000 ms\n"
    )
    assert 1 not in judged(called).culprits, "the barrier of group dp_group: its rank 1, not the job's"


def test_a_launcher_that_cannot_reach_a_host_by_ssh_is_the_set_up() -> None:
    """DeepSpeed's launcher checks every host of its hostfile with ssh before it starts any rank."""
    lines = (
        "Traceback (most recent call last):\n"
        '  File "/env/bin/deepspeed", line 6, in <module>\n'
        "    main()\n"
        '  File "/env/deepspeed/launcher/runner.py", line 400, in main\n'
        "    raise RuntimeError(\n"
        "RuntimeError: Using hostfile at /job/hostfile but host=worker-1 was not reachable via ssh. If you are "
        "running with a single node please remove /job/hostfile or setup passwordless ssh.\n"
    )
    verdict = judged(lines)
    assert verdict.culprits == [] and verdict.nobody is not None and "passwordless ssh" in verdict.nobody


def test_nccls_system_error_quoted_by_torch_with_nothing_else_failing_is_ncclss_set_up() -> None:
    """torch quotes NCCL's result (a system call NCCL made failed: its shared memory, a socket); a peer
    gone (``ncclRemoteError``) is not read so: that is a peer's end."""
    lines = (
        "RuntimeError: NCCL error in: /torch/lib/c10d/ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version "
        "2.7.8\n"
        "ncclSystemError: System call (socket, malloc, munmap, etc) failed.\n"
    )
    verdict = judged(lines)
    assert verdict.culprits == [] and verdict.nobody is not None and "unhandled system error" in verdict.nobody
    remote = "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.\n"
    assert judged(remote).nobody is None
    agent = (
        "E1203 10:00:00.000000 1 torch/distributed/elastic/multiprocessing/api.py:826] failed (exitcode: 1) "
        "local_rank: 3 (pid: 4242) of binary: /env/bin/python\n"
    )
    assert judged(lines + agent).nobody is None  # the peer NCCL lost may be the process torchrun saw fail
    quoted = "".join(f"[rank0]: {line}" for line in lines.splitlines(keepends=True))
    assert "NCCL's call failed (unhandled system error)" in (judged(quoted).nobody or "")
    beside = judged(quoted + "[rank2]: epoch 3 step 120 loss 0.31\n")  # rank 2 raised no NCCL error
    assert "NCCL's call failed" not in (beside.nobody or "")
    internal = (  # NCCL 2.2x's words for its internal error
        "torch.distributed.DistBackendError: NCCL error in: /torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3376, "
        "internal error - please report this issue to the NCCL developers, NCCL version 2.25.1\n"
    )
    assert "NCCL's call failed (internal error" in (judged(internal).nobody or "")


def test_nccl_tests_of_nccl_1_run_every_gpu_in_one_process() -> None:
    """The tests of NCCL 1 print their ranks without a pid: one process drives them all."""
    lines = "".join(f"#   Rank  {r} on     node03 device  {r} [0x00] Tesla P100-PCIE-16GB\n" for r in range(4))
    verdict = judged(lines + "NCCL failure all_reduce.cu:95 'unhandled cuda error'\n")
    assert verdict.nobody is not None and verdict.nobody.startswith("one process on node03, driving GPUs 0, 1, 2, 3")


def test_an_interface_nccl_was_given_that_the_host_lacks_is_the_set_up() -> None:
    lines = (
        "[trainer3]:n1:1958:1958 [3] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth2\n"
        "[trainer0]:ncclInternalError: Internal check failed.\n"
        "[trainer0]:ncclSocketInit: connecting to address  with family 59936 is neither AF_INET(2) nor AF_INET6(10)\n"
    )
    verdict = judged(lines)
    assert verdict.culprits == [] and verdict.nobody is not None and "no address to bootstrap on" in verdict.nobody


@pytest.mark.parametrize(
    "abort", ["double free or corruption (!prev)", "*** Error in `python': free(): invalid pointer: 0x00007f3a ***"]
)
def test_a_rank_glibc_aborts_over_its_corrupted_heap_is_suspected(abort: str) -> None:
    lines = (
        "[1,2]<stderr>:epoch 1 step 10\n"
        f"[1,6]<stderr>:{abort}\n"
        "[1,6]<stderr>:[n1:47506] *** Process received signal ***\n"
        "[1,6]<stderr>:[n1:47506] Signal: Aborted (6)\n"
    )
    verdict = judged(lines)
    assert [s.rank for s in verdict.suspects][:1] == [6] and "glibc" in verdict.suspects[0].why


def test_glogs_crash_reports_in_one_second_with_a_bus_error_are_the_nodes_shared_memory() -> None:
    """glog's handler reports SIGTERM too: its report is a crash where its signal is one a process gets of
    itself; each names its pid, but a launcher names the same process by rank, so one is not counted twice."""
    glog = (
        '*** Aborted at {t} (unix time) try "date -d @{t}" if you are using GNU date ***\n'
        "*** {signal} (@0x7f1f2c367f56) received by PID {pid} (TID 0x7f1f) from PID 0; stack trace: ***\n"
    )
    bus = "mpirun noticed that process rank 1 with PID 24 on node b7 exited on signal 7 (Bus error).\n"
    crashed = "".join(glog.format(t=1554366514, signal="SIGBUS", pid=24 + i) for i in range(4))
    verdict = judged(crashed + bus)
    assert verdict.nobody is not None and "at once (signal 7 (SIGBUS)): the node's shared memory" in verdict.nobody
    apart = glog.format(t=1554366514, signal="SIGBUS", pid=24) + glog.format(t=1554366600, signal="SIGBUS", pid=25)
    assert judged(apart + bus).nobody is None
    torn_down = glog.format(t=1554366514, signal="SIGBUS", pid=24) + "".join(
        glog.format(t=1554366514, signal="SIGTERM", pid=25 + i) for i in range(3)
    )
    assert judged(torn_down + bus).nobody is None


def test_ranks_failing_alike_while_another_goes_on_past_them_are_the_culprits() -> None:
    """Ranks 1 and 2 raise at one line, rank 0 writes its lines past it (a result only rank 0 computes, say): a
    code path or data of theirs, not every rank's. Rank 0's lines before their failure show nothing past it."""
    both = "".join(
        f"[rank{rank}]: {line}\n"
        for rank in (1, 2)
        for line in ("Traceback (most recent call last):", '  File "/job/train.py", line 221, in main',
                     "    log.info(results['recall'])", "KeyError: 'recall'")
    )  # fmt: skip
    going_on = "[rank0]: evaluation finished in 565 seconds\n[rank0]: recall 63.7\n"
    assert "failed alike" in (judged(going_on + both).nobody or ""), "rank 0's lines before: every rank's may be"
    assert judged(both + going_on).culprits == [1, 2]
    assert "rank 0: no evidence (no watchdog line in the log): its lines go on past" in render_analysis(
        analyzed(both + going_on)
    )


def test_ranks_raising_ncclss_error_alike_beside_a_rank_that_raised_none_are_not_the_program() -> None:
    """Two ranks lost their peer at once and said so alike; a third rank's lines show it raised no
    NCCL error: it may be the peer they lost, so they did not fail alike of the program."""
    error = (
        "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
    )
    both = "".join(
        f"[rank{rank}]: {line}\n"
        for rank in (0, 1)
        for line in ("Traceback (most recent call last):", '  File "/job/train.py", line 40, in <module>',
                     "    dist.all_reduce(t)", error.rstrip())
    )  # fmt: skip
    alone = judged(both)
    assert alone.culprits == [] and "failed alike" in (alone.nobody or "")
    beside = judged("[rank2]: epoch 3 step 120 loss 0.31\n" + both)
    assert "failed alike" not in (beside.nobody or "")
    own = both.replace("unhandled system error", "unhandled cuda error")  # each rank's own CUDA failure
    assert "failed alike" in (judged("[rank2]: epoch 3 step 120 loss 0.31\n" + own).nobody or "")


@pytest.mark.parametrize(
    "why",
    ["No authentication methods available", "Authentication failed.", "not a valid RSA private key file"],
)
def test_a_launcher_whose_ssh_to_a_node_failed_before_it_ran_anything_is_the_set_up(why: str) -> None:
    """ColossalAI's launcher runs torchrun on each node over ssh (fabric): a node it could not log in to."""
    line = (
        "Error: failed to run torchrun --nproc_per_node=8 --nnodes=2 --node_rank=1 --master_addr=n1 "
        f"--master_port=29500 train.py on n2, is localhost: False, exception: {why}\n"
    )
    verdict = judged(line)
    assert verdict.culprits == [] and "could not reach every node" in (verdict.nobody or "")
    ran = line.replace(f"exception: {why}", "exception: Encountered a bad command exit code!")
    assert "could not reach every node" not in (judged(ran).nobody or ""), "the command ran there, and failed"


def test_arguments_the_scripts_parser_refuses_in_every_process_are_the_launch() -> None:
    """torch.distributed.launch passes --local_rank=N to each process: a parser that does not take it
    refuses it in every one, whichever the paste shows."""
    lines = "".join(
        f"usage: main.py [-h] --config CONFIG\nmain.py: error: unrecognized arguments: --local_rank={rank}\n"
        for rank in (1, 0)
    )
    verdict = judged(lines)
    assert verdict.culprits == [] and verdict.suspects == []
    assert "argument parser refused the command line" in (verdict.nobody or "")
    other = (
        "E1203 10:00:00.000000 1 api.py:826] failed (exitcode: 1) local_rank: 3 (pid: 9914) of binary: /env/python\n"
    )
    assert "arguments" not in (judged(lines + other).nobody or ""), "a worker ended otherwise than argparse ends it"


def test_ncclss_refusal_of_a_rank_beyond_the_world_is_the_launch() -> None:
    line = "n2:31:31 [0] init.cc:981 NCCL WARN Invalid rank requested : 4/4\n"
    verdict = judged(line)
    assert verdict.culprits == [] and "a rank outside the world size" in (verdict.nobody or "")


def test_mpiruns_line_with_its_node_left_out_is_read() -> None:
    """A paste that took the host name out of mpirun's sentence still says which rank, and how."""
    verdict = judged(
        "mpirun noticed that process rank 0 with PID 0 on node exited on signal 4 (Illegal instruction).\n"
    )
    assert verdict.culprits == [] and "SIGILL" in (verdict.nobody or "")


def test_two_processes_on_one_gpu_as_ncclss_member_lines_show_them_are_the_device_assignment() -> None:
    """Two processes of one host, ranks 0 and 1 of a communicator of two, on the same bus id: the launch
    gave both the same GPU (NCCL's "Duplicate GPU detected" not in the paste)."""
    member = "n1:{pid}:{pid} [0] NCCL INFO comm 0x55{pid} rank {rank} nranks 2 cudaDev 0 busId {bus} - Init COMPLETE\n"
    same = member.format(pid=101, rank=0, bus=86000) + member.format(pid=102, rank=1, bus=86000)
    assert "both on the GPU of bus id 86000 on n1" in (judged(same).nobody or "")
    apart = member.format(pid=101, rank=0, bus=86000) + member.format(pid=102, rank=1, bus=87000)
    assert "bus id" not in (judged(apart).nobody or "")
    one_process = member.format(pid=101, rank=0, bus=86000) + member.format(pid=101, rank=1, bus=86000)
    assert "bus id" not in (judged(one_process).nobody or ""), "one process in two communicators"
    restarted = same + member.format(pid=203, rank=0, bus=87000)
    assert "bus id" not in (judged(restarted).nobody or ""), "rank 0 in two processes: launched again"


def fr_trace_report(group: str, missing: str) -> str:
    return (
        "Not all ranks joining collective: sequence number: 812\n"
        "internal record id: 811\n"
        f"group info: {group}\n"
        "collective: nccl:all_gather\n"
        f"missing ranks: {{{missing}}}\n"
        "input sizes: [[1024]]\n"
        "world size: 4\n"
        "expected ranks: {0, 1, 2, 3}\n"
        "collective state: scheduled\n"
    )


def test_flight_recorders_analyzer_proves_the_ranks_that_never_issued_the_collective() -> None:
    """Its ranks are the job's in every group: the analyzer reads each group's members as global
    ranks; a rank missing from one collective and waiting in another is not the first."""
    verdict = judged(fr_trace_report("0:default_pg", "2"))
    assert verdict.culprits == [2] and "never issued collective #812 (all_gather)" in verdict.headline
    subgroup = judged(fr_trace_report("3:tp", "1"))
    assert subgroup.culprits == [1] and "of group 3:tp" in subgroup.headline
    cycle = judged(fr_trace_report("0:default_pg", "2, 3") + fr_trace_report("3:tp", "1"))
    assert cycle.culprits == [], "ranks 2 and 3 wait in tp's collective, rank 1 in the world's: orders differ"
    waits = fr_trace_report("3:tp", "3").replace("{0, 1, 2, 3}", "{2, 3}")
    assert judged(fr_trace_report("0:default_pg", "2, 3") + waits).culprits == [3], "rank 2 waits in tp for 3"
    comma = fr_trace_report("0:default_pg", "2").replace("collective: sequence", "collective, sequence")
    assert judged(comma).culprits == [2]
    then = fr_trace_report("3:tp", "1") + "Collective sequence number: 212 has errors\ngroup info: 0:default_pg\n"
    assert "of group 3:tp" in judged(then).headline, "the next report's group is not the first's"
    short = "Not all ranks joining collective, sequence number: 4\ncollective: nccl:all_reduce\nmissing ranks: {1}\n"
    assert judged(short).culprits == [1], "torchcomms' report: no group, no expected ranks"
    first_era = (
        "Not all ranks joining collective for group 0:default_pg collective nccl:all_reduce  Missing ranks are {1}  "
        "[[3, 4]] [[3, 4]] 2 scheduled  \nCollective stack traces: \n"
    )
    assert judged(first_era).culprits == [1]


def test_flight_recorders_analyzer_read_against_the_ranks_own_lines() -> None:
    """A rank missing from a collective whose own watchdog line shows it waiting in another is no
    first cause; ranks each waiting in a collective another skipped issued them in different
    orders (nobody); reports that only count their groups' ranks leave that unsaid (suspects)."""
    waits = (
        "[rank1]:[E1015 10:31:20.123456789 ProcessGroupNCCL.cpp:632] [PG ID 1 PG GUID 1(tp) Rank 1] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=12, OpType=_ALLGATHER_BASE, NumelIn=1024, NumelOut=2048, "
        "Timeout(ms)=600000) ran for 600012 milliseconds before timing out.\n"
    )
    assert judged(waits + fr_trace_report("0:default_pg", "1, 3")).culprits == [3]
    cycle = fr_trace_report("1:tp", "1").replace("{0, 1, 2, 3}", "{0, 1}") + fr_trace_report("2:dp", "0").replace(
        "{0, 1, 2, 3}", "{0, 1}"
    )
    verdict = judged(cycle)
    assert verdict.culprits == [] and "different orders" in (verdict.nobody or "")
    counted = "".join(
        fr_trace_report(group, missing).replace("expected ranks: {0, 1, 2, 3}", "expected ranks: 2")
        for group, missing in (("1:tp", "1"), ("3:dp", "3"))
    )
    verdict = judged(counted)
    assert verdict.culprits == [] and sorted(suspects(verdict)[:2]) == [1, 3]


def test_flight_recorders_report_of_errors_suspects_the_side_fewer_ranks_stand_on() -> None:
    """Its culprits are the ranks whose entry differs from the first rank's: where they are most of
    the group, the first rank's side is the odd one."""
    report = (
        "Collective sequence number: 7 has errors\ngroup info: 0:default_pg\ncollective: nccl:all_reduce\n"
        "world size: 4\nexpected ranks: {{0, 1, 2, 3}}\nerror msg: {culprits}\n"
    )
    differ = "Culprit rank {}; Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes: '[[1]]' does not match"
    one = judged(report.format(culprits=differ.format(3)))
    assert one.culprits == [] and suspects(one)[:1] == [3] and "otherwise than ranks 0-2" in one.headline
    most = judged(report.format(culprits=", ".join(differ.format(r) for r in (1, 2, 3))))
    assert suspects(most)[:1] == [0]


def test_a_rank_a_report_names_that_raised_is_shown_with_its_exception() -> None:
    """Why it never came: its own traceback, not a hint to take its stack while it hangs."""
    oom = (
        "[rank2]: Traceback (most recent call last):\n"
        '[rank2]:   File "/srv/train.py", line 120, in <module>\n'
        "[rank2]:     loss = model(batch).sum()\n"
        "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    shown = render_analysis(analyzed(oom + fr_trace_report("0:default_pg", "2")))
    assert "OutOfMemoryError" in shown.split("Where each rank stood")[0] and "py-spy" not in shown


def test_a_desync_report_of_a_subgroup_names_no_global_rank() -> None:
    """Its ``[1]`` is a rank of the group its prefix names, whatever the reporter's global rank."""
    report = (
        "[rank0]:[E1015 10:31:33.2 ProcessGroupNCCL.cpp:1620] [PG ID 2 PG GUID 7(pp) Rank 0]  - [0] Timeout at "
        "collective: BROADCAST, #3\n"
        "[rank0]: - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:\n"
        "[rank0]:   - [1] finished collective #2, but didn't join collective #3 (count from 1)\n"
        "[rank0]: - Snapshot of ranks' latest states:\n"
        "[rank0]:     #3 started ranks:\n"
        "[rank0]:       [0, 2] started BROADCAST\n"
    )
    assert judged(report).culprits == []
    assert judged(report.replace("PG GUID 7(pp)", "PG GUID 0(default_pg)").replace("PG ID 2", "PG ID 0")).culprits == [
        1
    ]


def test_a_desync_report_of_one_rank_against_one_suspects_both() -> None:
    """Rank 1 finished #2 and never started #3, which rank 0 alone went on to: one against one, rank 1 stopped in
    its own code or rank 0 called a collective only it calls; the report proves neither. Where a second peer went
    on too, the one stopped is proven."""
    report = (
        "[rank0]:[E1015 10:31:33.2 ProcessGroupNCCL.cpp:1620] [PG ID 0 PG GUID 0(default_pg) Rank 0]  - [0] Timeout "
        "at collective: ALLREDUCE, #3\n"
        "[rank0]: - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:\n"
        "[rank0]:   - [1] finished collective #2, but didn't join collective #3 (count from 1)\n"
        "[rank0]: - Snapshot of ranks' latest states:\n"
        "[rank0]:     #3 started ranks:\n"
        "[rank0]:       [0] started ALLREDUCE\n"
    )
    verdict = judged(report)
    assert verdict.culprits == [] and suspects(verdict)[:2] == [1, 0], verdict.headline
    assert "which its one peer went on to" in verdict.headline
    assert judged(report.replace("[0] started ALLREDUCE", "[0, 2] started ALLREDUCE")).culprits == [1]
    short = (
        "[rank0]:[E1015 10:31:33.1 ProcessGroupNCCL.cpp:1620] [PG ID 0 PG GUID 0(default_pg) Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=8000) "
        "ran for 8012 milliseconds before timing out.\n"
    )
    assert judged(short).nobody is not None, "a timeout of 8 s alone: the configuration"
    verdict = judged(short + report)
    assert verdict.nobody is None and suspects(verdict)[:2] == [1, 0], "the report says more than the timeout"
    assert "the collective timeout is 8.0s" in verdict.headline


def test_a_ranks_prefix_after_another_ranks_progress_bar_starts_its_own_line() -> None:
    """tqdm ends its bar with no newline: the next process's line, with its --tee prefix, runs on."""
    bar = "[default0]:Tokenizing:   8%|▊         | 726/9672 [02:32<30:38, 4.86 examples/s]"
    watchdog = (
        "[default{rank}]:[E ProcessGroupNCCL.cpp:475] [Rank {rank}] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600888 "
        "milliseconds before timing out.\n"
    )
    verdict = judged(bar + watchdog.format(rank=1))
    assert [s.rank for s in verdict.suspects][:1] == [0], verdict.headline


def test_the_worker_torchruns_agent_did_not_close_is_suspected_where_the_pids_run_on_but_for_it() -> None:
    """The agent sends SIGTERM to the workers still alive; they started one after another in
    local-rank order: the pid missing between them had ended first."""
    closing = "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process {} closing signal SIGTERM\n"
    verdict = judged("".join(closing.format(pid) for pid in (52478, 52480, 52481)))
    assert verdict.culprits == [] and suspects(verdict)[:1] == [1]
    assert "pids 52478-52481 but 52479" in verdict.suspects[0].why
    apart = judged("".join(closing.format(pid) for pid in (52478, 52483, 52490)))
    assert 1 not in suspects(apart), "pids far apart: their order says nothing"
    two = judged("".join(closing.format(pid) for pid in (52478, 52480)))
    assert 1 not in suspects(two), "two pids: the one that ended may be past them"


# --- pastes, a process's own GPU, a first collective half done ------------------------------


def test_a_torchrun_table_pasted_with_blank_lines_between_its_lines_is_read() -> None:
    table = (
        "Root Cause (first observed failure):\n[0]:\n  time      : 2024-03-01_10:00:05\n  host      : node-1\n"
        "  rank      : 6 (local_rank: 6)\n  exitcode  : -9 (pid: 102)\n  error_file: <N/A>\n"
        "  traceback : Signal 9 (SIGKILL) received by PID 102\n"
    )
    assert alone(judged(table.replace("\n", "\n\n"))) == alone(judged(table)) == [6]


def test_a_collectors_stamp_and_its_colon_before_open_mpis_tag_are_taken_off() -> None:
    [written] = lines_as_written(["2024-01-02T03:04:05.678Z: [1,2]<stderr>:ValueError: bad sample"])
    assert (written.text, written.stamp) == ("[rank2]:ValueError: bad sample", "2024-01-02T03:04:05.678Z")


def test_open_mpis_signal_handler_labelled_by_pid_alone_names_the_process_not_a_rank() -> None:
    handler = "".join(
        f"[4242] {line}\n"
        for line in (
            "*** Process received signal ***",
            "Signal: Segmentation fault (11)",
            "Signal code:  (128)",
            "Failing at address: (nil)",
            "[ 0] /lib/libc.so.6(+0x42)[0x7f0]",
            "*** End of error message ***",
        )
    )
    analysis = analyzed(handler)
    verdict = assign_blame(analysis)
    assert not analysis.ranks and not verdict.culprits and not verdict.suspects
    assert "a process (pid 4242) ended by signal 11 (Segmentation fault), as Open MPI says" in verdict.headline


def first_watchdog(rank: int, seq: int, op: str) -> str:
    return (
        f"[rank{rank}]:[E101 01:02:03.000000000 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective "
        f"operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for "
        "600050 milliseconds before timing out.\n"
    )


def test_a_ranks_first_collective_that_its_peer_completed_never_reached_it_the_set_up() -> None:
    """Rank 0 went on to #2: it joined #1, so what #1 carried to rank 1 was lost on the way."""
    verdict = judged(first_watchdog(1, 1, "BROADCAST") + first_watchdog(0, 2, "ALLREDUCE"))
    assert not verdict.culprits and not verdict.suspects
    assert verdict.nobody is not None and "the group's first, which rank 0 completed" in verdict.nobody


def test_the_one_rank_missing_beside_ranks_waiting_in_the_first_collective_is_suspected() -> None:
    """Ranks 1-3 wait in their group's first broadcast; rank 0, the fourth, has no line: it may never
    have called it (its communicator made before it, eagerly), so it is suspected, not cleared. One
    rank's line alone, or every rank's, is still the set-up's."""
    three = judged("".join(first_watchdog(r, 1, "BROADCAST") for r in (1, 2, 3)))
    assert three.nobody is None and suspects(three)[:1] == [0], three.headline
    assert judged(first_watchdog(1, 1, "BROADCAST")).nobody is not None, "one rank's lines alone: the set-up"
    every = judged("".join(first_watchdog(r, 1, "BROADCAST") for r in range(4)))
    assert every.nobody is not None, "every rank waits in it: the set-up"


def test_a_rank_behind_its_peer_later_in_the_job_is_still_the_one_named() -> None:
    """Past a group's first collective the connections were made and used: the rank behind is named."""
    verdict = judged(first_watchdog(1, 7, "BROADCAST") + first_watchdog(0, 8, "ALLREDUCE"))
    assert verdict.nobody is None and verdict.culprits == [1]


@pytest.mark.parametrize(("device", "suspected"), [(3, [3]), (0, [])])
def test_a_process_out_of_memory_on_gpu_n_suspects_local_rank_n_but_not_gpu_0(
    device: int, suspected: list[int]
) -> None:
    """A process given one GPU alone sees it as GPU 0, whatever its rank: GPU 0 says nothing of it."""
    oom = (
        'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    loss.backward()\n'
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {device} has a total capacity "
        "of 79.15 GiB of which 1.00 GiB is free.\n"
    )
    verdict = judged(oom)
    assert suspects(verdict) == suspected and not verdict.culprits


def test_a_failure_the_log_shows_alone_is_suspected_and_beside_another_rank_proven() -> None:
    """A paste of one rank's failure and nothing of the others may hold what every rank raised: the
    rank is suspected, told with its evidence, not proven; another rank's lines before its error do not show that
    rank past where it failed (a launcher's word on a rank's end comes after every line of it). Beside another rank
    waiting for it, going on without it, the failure is its own (a worker its launcher tore down was alive then, no
    more); a GPU's hardware fault is its device's whatever else the log shows."""
    oom = "[rank3]: Traceback (most recent call last):\n[rank3]: torch.OutOfMemoryError: CUDA out of memory.\n"
    verdict = judged(oom)
    assert alone(verdict) == [3] and "suspected, not proven" in verdict.headline
    shown = render_analysis(analyzed(oom))
    assert "SUSPECTED rank 3" in shown and "every rank may have failed so" in shown
    assert "rank 3 raised torch.OutOfMemoryError" in shown and "What to do: fix the error" in shown, "as a culprit's"
    assert "follow from it" not in shown, "no other rank's end the log shows follows from it"
    waiting = (
        "[rank1]:[E501 10:00:00.0 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600005 "
        "milliseconds before timing out.\n"
    )
    assert judged(oom + waiting).culprits == [3], "rank 1 waited for it"
    went_on = "[rank0]: step 41 loss 2.31\n"
    assert judged(oom + went_on).culprits == [3], "rank 0 went on: it did not raise so"
    assert alone(judged(went_on + oom)) == [3], "rank 0's line before rank 3 failed: it may have failed so after"
    assert alone(judged(oom + "[rank0]: Tracebac")) == [3], "rank 0's traceback begun where the paste ends"
    assert alone(judged(oom + "[rank0]: Runt")) == [3], "a lone word where the paste ends: any line's start"
    count = "Primary job  terminated normally, but 1 process returned\na non-zero exit code. Per user-direction\n"
    segv = "mpirun noticed that process rank 1 with PID 0 on node n1 exited on signal 11 (Segmentation fault).\n"
    assert alone(judged(count + segv)) == [1], "mpirun's count of processes names no other rank"
    agent = "failed (exitcode: 1) local_rank: 3 (pid: 48213) of binary: /usr/bin/python\n"
    assert alone(judged(oom.replace("rank3", "rank11") + agent)) == [11], "local rank 3 is no other rank"
    closing = "W0501 10:00:01.000 1 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 48214 "
    torn = judged(oom + closing + "closing signal SIGTERM\n")
    assert alone(torn) == [3], "a worker torn down was alive then, not shown past where rank 3 stopped"
    disk = "[rank5]: Traceback (most recent call last):\n[rank5]: OSError: [Errno 28] No space left on device\n"
    assert judged(oom + disk).culprits == [3, 5], "two failing otherwise: not every rank's alike"
    ecc = "[rank5]: RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
    assert judged(ecc).culprits == [5], "its GPU's own fault"
    assert judged(ecc + ecc.replace("rank5", "rank2")).culprits == [2, 5], "each GPU's, however many"


def test_a_dataloader_workers_crash_is_its_ranks_and_alike_in_every_rank_nobodys() -> None:
    """torch's handler in a DataLoader worker says the signal that killed it, under its rank's label. Ranks whose
    workers crashed alike are so beside another rank going on: a worker dies when it dies, at no point of the program
    the others have passed."""
    segv = "[rank{r}]:ERROR: Unexpected segmentation fault encountered in worker.\n"
    going = "[rank0]: step 40 loss 2.1\n"
    verdict = judged(segv.format(r=3) + going)
    assert verdict.culprits == [3] and "Unexpected segmentation fault" in verdict.headline
    assert "num_workers=0" in render_analysis(analyzed(segv.format(r=3) + going)), "what to do for a worker's crash"
    nobody = judged(segv.format(r=1) + segv.format(r=2)).nobody
    assert nobody is not None and "failed alike" in nobody
    past = judged(segv.format(r=1) + segv.format(r=2) + going).nobody
    assert past is not None and "failed alike" in past, "rank 0 going on has passed no point where a worker dies"
    bus = "[rank{r}]:ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared "
    shm = judged("".join(bus.format(r=r) + "memory (shm).\n" for r in (1, 2))).nobody
    assert shm is not None and "shared memory" in shm


def test_a_device_past_the_gpus_a_process_sees_is_the_launchs_not_a_ranks() -> None:
    """torch's own check of a device index (``CUDAContext.cpp``), as CUDA's ``invalid device ordinal``."""
    line = (
        "[rank2]: torch.cuda.DeferredCudaCallError: CUDA call failed lazily at initialization with error: device >= 0 "
        '&& device < num_gpus INTERNAL ASSERT FAILED at "../aten/src/ATen/cuda/CUDAContext.cpp":49, please report\n'
    )
    nobody = judged(line).nobody
    assert nobody is not None and "device assignment" in nobody


COMPOSER = """ERROR:composer.cli.launcher:Rank 1 crashed with exit code 1.
INFO:composer.cli.launcher:Killing global rank 0 (PID 3100) with SIGTERM
Global rank 1 (PID 3101) exited with code 1
----------Begin global rank 1 STDERR----------
Traceback (most recent call last):
  File "/w/train.py", line 86, in <module>
    main(cfg)
ValueError: Sample 88123 has 4211 tokens, more than max_seq_len
----------End global rank 1 STDERR----------
"""


def test_composers_launcher_gives_a_failed_ranks_own_output_and_its_traceback_is_read_as_its() -> None:
    """Composer prints a failed rank's output between its Begin and End lines, after its own word on
    the rank; the traceback there says more than the word, and is the rank's."""
    verdict = judged(COMPOSER)
    assert "rank 1 raised ValueError: Sample 88123" in verdict.headline
    console = "".join(  # local rank 0's output goes to the console, unlabelled: the one traceback, the one rank
        line.replace("Rank 1 crashed", "Rank 0 crashed").replace("global rank 0 (PID 3100)", "global rank 2 (PID 3102)")
        + "\n"
        for line in COMPOSER.splitlines()
        if "global rank 1" not in line.lower() and "STDERR" not in line
    )
    assert "rank 0 raised ValueError" in judged(console).headline
    said = render_analysis(analyzed(COMPOSER))
    assert "rank 0 (only Composer's launcher's word on how it ended)" in said
    assert "torn down by Composer's launcher (running until then)" in said, "not 'never heard from'"
    logged = 'Traceback (most recent call last):\n  File "/w/log.py", line 9, in flush\n    post()\nOSError: 429\n'
    earlier = COMPOSER.replace("STDERR----------\nTraceback", "STDERR----------\n" + logged + "Traceback", 1)
    assert "rank 1 raised ValueError" in judged(earlier).headline, "the block's last traceback: the one it died of"


def test_a_launchers_word_with_more_on_its_line_keeps_it() -> None:
    line = "[TensorRT-LLM][ERROR] Failed to initialize executor on rank {r}: KeyError: 'qwen3_5'\n"
    nobody = judged(line.format(r=0) + line.format(r=1)).nobody
    assert nobody is not None and "failed to initialize its executor: KeyError: 'qwen3_5'" in nobody


def test_a_rank_stopped_by_a_signal_failed_of_nothing_its_own() -> None:
    """torchrun's handler's SignalException, Lightning's SIGTERMException: the process was sent a
    signal from outside; a rank's own error before it is still the cause."""
    stopped = (
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "/w/train.py", line 64, in <module>\n'
        "[rank1]: lightning.fabric.utilities.exceptions.SIGTERMException\n"
    )
    nobody = judged(stopped).nobody
    assert nobody is not None and "stopped by a signal from outside" in nobody
    agent = (
        "Traceback (most recent call last):\n"
        '  File "/venv/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/api.py", line 79, in '
        "_terminate_process_handler\n"
        '    raise SignalException(f"Process {os.getpid()} got signal: {sigval}", sigval=sigval)\n'
        "torch.distributed.elastic.multiprocessing.api.SignalException: Process 140 got signal: 15\n"
    )
    assert judged(agent).nobody is not None, "torchrun's agent's own, its death signal's line cut"
    own = "[rank2]: Traceback (most recent call last):\n[rank2]: RuntimeError: CUDA error: misaligned address\n"
    assert judged(own + stopped).nobody is None, "rank 2 failed of its own first"


def test_a_hang_someone_interrupted_suspects_the_rank_stopped_outside_the_collective() -> None:
    """Ctrl-C stops every rank where it stands: those in a collective waited for the one elsewhere."""

    def stopped(rank: int, frames: list[tuple[str, int, str]]) -> str:
        lines = ["Traceback (most recent call last):"]
        lines += [f'  File "{file}", line {n}, in {func}\n    {func}()' for file, n, func in frames]
        return "".join(f"[rank{rank}]: {line}\n" for line in [*"\n".join(lines).splitlines(), "KeyboardInterrupt"])

    main = ("/w/train.py", 97, "train_step")
    waiting = [main, ("/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", 2501, "all_reduce")]
    log = "".join(stopped(r, waiting) for r in (0, 1, 2)) + stopped(3, [main, ("/w/data.py", 44, "_open_shard")])
    verdict = judged(log)
    assert suspects(verdict)[:1] == [3] and "_open_shard" in verdict.suspects[0].why
    lost = (
        "[rank1]: torch.distributed.DistBackendError: NCCL error: remote process exited or there was a network error\n"
    )
    alone_stopped = stopped(0, [main, ("/w/data.py", 44, "_open_shard")]) + lost
    assert suspects(judged(alone_stopped))[:1] == [0], "the peer rank 1 lost: the rank someone stopped"
    killed = "failed (exitcode: -9) local_rank: 1 (pid: 4243) of binary: /usr/bin/python\n"
    sigterm = stopped(0, [main]).replace("KeyboardInterrupt", "lightning.fabric.utilities.exceptions.SIGTERMException")
    assert judged(killed + sigterm).nobody is None, "a worker killed first: the SIGTERMs were its teardown"
    assert judged(sigterm).nobody is not None, "SIGTERM alone: from outside"


def test_a_rank_that_waited_in_the_store_is_no_suspect_the_rank_it_awaited_is() -> None:
    """torchrun's first observed failure is a waiter's timeout in the store: the rank it waited for leads."""
    waits = "".join(
        f"[rank{r}]: RuntimeError: [{r}] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via "
        "c10d key-value store by key '0', but store->get('0') got error: Socket Timeout\n"
        for r in (1, 2)
    )
    agent = "failed (exitcode: 1) local_rank: 1 (pid: 4243) of binary: /usr/bin/python\n"
    verdict = judged(waits + agent)
    assert suspects(verdict)[:1] == [0] and 1 not in suspects(verdict)


def test_a_launchers_word_beside_a_ranks_own_traceback_proves_nothing() -> None:
    """Composer names the first rank it polled found ended: the traceback of another says what failed."""
    lost = COMPOSER.replace("Rank 1 crashed", "Rank 0 crashed").replace(
        "Killing global rank 0", "Killing global rank 2"
    )
    verdict = judged(lost)
    assert 0 not in verdict.culprits and "rank 1 raised ValueError" in verdict.headline


def test_a_composer_block_whose_end_was_cut_ends_at_the_launchers_next_line() -> None:
    cut = COMPOSER.replace("----------End global rank 1 STDERR----------\n", "")
    later = "ERROR:composer.cli.launcher:Global rank 0 (PID 3100) exited with code -15\n[rank3]: step 7\n"
    assert 3 in analyzed(cut + later).log.seen


def test_a_suspicion_alone_is_said_once() -> None:
    said = render_analysis(analyzed("ERROR:composer.cli.launcher:Rank 2 crashed with exit code -6.\n"))
    assert "SUSPECTED rank 2: rank 2 ended by signal 6" in said and "suspected: rank 2 (" not in said


def test_ranks_that_raised_different_exceptions_are_not_said_to_raise_one() -> None:
    raised = "[rank{r}]: Traceback (most recent call last):\n[rank{r}]: {e}\n"
    going = "[rank0]: step 12 loss 2.0\n"
    log = raised.format(r=1, e="torch.OutOfMemoryError: CUDA out of memory.") + raised.format(
        r=3, e="ValueError: Sample 88123 has no tokens"
    )
    assert "ranks 1, 3 raised exceptions of their own (torch.OutOfMemoryError first, ValueError)" in (
        judged(log + going).headline
    )


def test_a_paste_begun_at_an_exception_line_holds_that_exception() -> None:
    """The paste cut the traceback above its last line: the exception a launcher's line then
    says a worker died of; only at the paste's first line (elsewhere such a line is any text)."""
    agent = (
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 4242) of "
        "binary: /usr/bin/python\n"
    )
    for paste in ("", "\n  \n", "    return amp.scale(loss)\n"):  # blank lines, or the source line above it
        verdict = judged(paste + "NameError: name 'amp' is not defined\n" + agent)
        assert verdict.nobody is not None and "NameError: name 'amp' is not defined" in verdict.nobody
    later = judged("Starting epoch 1\nNameError: name 'amp' is not defined\n" + agent)
    assert later.nobody is None and [s.rank for s in later.suspects][:1] == [0]


def test_a_process_spawn_names_is_its_rank_only_where_nothing_says_otherwise() -> None:
    """``mp.spawn``'s index is the rank on one node: the rank of that number shown waiting is
    another process (the index is of a later node's), and the same error under a rank's own
    prefix is that rank's, said once."""
    watchdog = (
        "[E ProcessGroupNCCL.cpp:475] [Rank {}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, "
        "OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=1800000) ran for 1800300 milliseconds before timing "
        "out.\n"
    )
    spawned = (
        "torch.multiprocessing.spawn.ProcessRaisedException: \n\n-- Process 1 terminated with the following error:\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/train.py", line 151, in main\n'
        "    loss.backward()\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    elsewhere = judged("".join(watchdog.format(r) for r in (0, 1, 2, 4)) + spawned)
    assert 1 not in elsewhere.culprits and suspects(elsewhere)[:1] == [3]
    prefixed = "".join(f"[rank5]: {line}\n" for line in spawned.splitlines()[3:])
    twin = judged(prefixed + spawned)
    assert twin.culprits == [5] or suspects(twin)[:1] == [5]
    assert 1 not in twin.culprits + suspects(twin)
    assert read_log((prefixed + spawned).splitlines()).seen == {5}, "rank 1 said nothing of its own"


def test_a_year_a_line_gives_after_glog_stamps_does_not_date_them() -> None:
    """glog's stamps read before any line gave the year stand in this year: the moment judged is
    said without one, not with this year's."""
    lines = (
        "[rank0]:[E0305 14:16:00.000000000 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600100 "
        "milliseconds before timing out.\n"
        "  time      : 2019-03-05_14:27:05\n"
    )
    shown = render_analysis(analyzed(lines)).splitlines()[0]
    assert "it gives no year" in shown and "2019" not in shown, shown


# --- a job of several nodes, pasted from one or from each ---------------------------------------

TABLE = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-05-02_10:14:{second}
  host      : {host}
  rank      : {rank} (local_rank: {local})
  exitcode  : {code} (pid: {pid})
  error_file: <N/A>
  traceback : {why}
============================================================
"""


def table(rank: int, local: int, code: int, second: int = 31, host: str = "gpu-node-1") -> str:
    why = "Signal 9 (SIGKILL) received by PID 4242" if code == -9 else "To enable traceback see: https://pytorch.org"
    return TABLE.format(second=second, host=host, rank=rank, local=local, code=code, pid=4242, why=why)


def test_another_nodes_killed_rank_stands_before_the_agent_signalled_after_it_and_ranks_failing_after() -> None:
    """Node 1's table: rank 11 killed at 10:14:31. Node 0's agent signalled after it (the scheduler
    stopping the job's other nodes), or node 0's ranks failing after it: neither clears rank 11, and
    ranks failing together after another was killed did not fail alike of the program."""
    signalled = (
        "[2024-05-02 10:14:31,900] torch.distributed.elastic.agent.server.api: [WARNING] Received Signals.SIGTERM "
        "death signal, shutting down workers\n"
    )
    verdict = judged(table(11, 3, -9) + signalled)
    assert verdict.nobody is None and (verdict.culprits or suspects(verdict))[:1] == [11]
    assert "killed (SIGKILL)" in render_analysis(analyzed(table(11, 3, -9))), "no crash of its own: sent"
    assert judged(signalled).nobody is not None, "the agent signalled, nothing failed before: stopped"
    after = table(11, 3, -9) + table(0, 0, 1, second=33, host="gpu-node-0") + table(1, 1, 1, 33, "gpu-node-0")
    verdict = judged(after)
    assert verdict.nobody is None and (verdict.culprits or suspects(verdict))[:1] == [11]


def test_torchruns_tee_labels_are_local_ranks_placed_by_the_lines_own_global_ranks() -> None:
    """``[default3]:`` is torchrun's ``--tee`` label, its local rank: on a node whose watchdog lines under
    ``[default0]:`` say ``[Rank 8]``, it is global rank 11."""
    lines = "[default3]:RuntimeError: CUDA error: an illegal memory access was encountered\n" + "".join(
        f"[default{local}]:[E502 10:24:31.1 ProcessGroupNCCL.cpp:616] [Rank {8 + local}] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=4811, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, "
        "Timeout(ms)=600000) ran for 600041 milliseconds before timing out.\n"
        for local in (0, 1)
    )
    verdict = judged(lines)
    assert (verdict.culprits or suspects(verdict))[:1] == [11] and 3 not in verdict.culprits
    assert (judged(lines.replace("Rank 8]", "Rank 0]").replace("Rank 9]", "Rank 1]")).culprits or [3])[:1] == [3]
    # no watchdog line of the node's: torchrun's agent places its workers (its table's row, its rendezvous)
    raised = "[default3]:RuntimeError: CUDA error: an illegal memory access was encountered\n"
    for agents in (
        "  rank      : 11 (local_rank: 3)\n",
        "I0502 10:00:00.0 1 api.py:525]   global_ranks=[8, 9, 10, 11]\n",
    ):
        assert (judged(raised + agents).culprits or suspects(judged(raised + agents)))[:1] == [11], agents


def test_slurms_out_of_memory_kill_naming_no_task_is_the_steps_memory() -> None:
    for said in ("event(s) in StepId=884217.0.", "event in StepId=884217.0", "event(s) in step 884217.0 cgroup."):
        log = (
            f"slurmstepd: error: Detected 1 oom-kill {said} Some of your processes may have been killed.\n"
            "srun: error: node-2: tasks 0-7: Terminated\nsrun: error: node-3: tasks 8-15: Terminated\n"
        )
        nobody = judged(log).nobody
        assert nobody is not None and "killed a process of the step for memory" in nobody, said
        assert "884217.0)" in nobody, "the step's number, not the sentence's full stop"


def test_a_launchers_first_exit_of_a_rank_that_lost_a_peer_is_no_suspect() -> None:
    """Every rank shown lost a peer: the one lost is not in the paste (another node), and torchrun's
    first exit on this node is a victim's."""
    lost = "".join(
        f"[rank{r}]: torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:275, remote process exited or "
        "there was a network error, NCCL version 2.20.5\n"
        for r in range(4)
    )
    agent = "E0502 10:24:33.5 140 api.py:833] failed (exitcode: 1) local_rank: 0 (pid: 9) of binary: /usr/bin/python3\n"
    verdict = judged(lost + agent)
    assert not verdict.culprits and suspects(verdict) == [] and "peer was lost" in verdict.headline


def test_a_workers_sigterm_torchrun_saw_first_is_a_stop_from_outside() -> None:
    nobody = judged(table(8, 0, -15)).nobody
    assert nobody is not None and "stopped from outside" in nobody


def test_deepspeeds_nodes_place_the_worker_its_launcher_saw_end_first() -> None:
    """DeepSpeed's launcher over pdsh prints each node's global ranks, then under pdsh's ``host: `` that
    a worker ended, not which: the node it ended on first holds the rank, the rank itself where the node
    ran one."""
    mapping = (
        "n1: [2024-05-02 11:02:14,101] [INFO] [launch.py:163:main] global_rank_mapping=defaultdict(<class 'list'>, "
        "{{'n1': {first}, 'n2': {second}}})\n"
    )
    ended = (
        "{host}: [2024-05-02 12:{minute}:03,120] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', "
        "'train.py', '--local_rank=0'] exits with return code = {code}\n"
    )
    pdsh = "pdsh@n1: {host}: ssh exited with exit code {code}\n"
    one = mapping.format(first=[0], second=[1]) + ended.format(host="n2", minute=30, code=-9)
    verdict = judged(one + pdsh.format(host="n2", code=247))
    assert suspects(verdict) == [1] and "the one worker on n2" in verdict.headline, verdict.headline
    eight = mapping.format(first=list(range(8)), second=list(range(8, 16)))
    later = ended.format(host="n1", minute=40, code=-6) + ended.format(host="n2", minute=30, code=-9)
    verdict = judged(eight + later)
    assert verdict.leading == list(range(8, 16)) and "ranks 8-15, none more than another" in verdict.headline
    assert "one of ranks 8-15 on n2" in verdict.suspects[0].why and 0 not in suspects(verdict)
    unreached = judged(mapping.format(first=[0], second=[1]) + pdsh.format(host="n2", code=255))
    assert "exit code 255" in unreached.suspects[0].why, "ssh's own failure, no signal"
    unplaced = judged(ended.format(host="n2", minute=30, code=-9))
    assert "n2" not in unplaced.headline, "no mapping: the node's ranks are not known"


def test_a_nodes_name_in_brackets_before_each_line_is_a_label() -> None:
    """Lines gathered from several nodes, each put behind its node's name: ``[node1] `` is taken off,
    the line's own indent kept (torchrun's table is read under it)."""
    labelled = "".join(f"[node1] {line}\n" for line in table(11, 3, -9).splitlines())
    verdict = judged(labelled)
    assert (verdict.culprits or suspects(verdict))[:1] == [11]
    assert next(lines_as_written(["[rank1] step 3"])).text.startswith("[rank1]"), "a rank's prefix is no node's name"


def test_a_local_rank_on_a_node_whose_processes_announced_their_ranks_is_placed_among_them() -> None:
    announced = "".join(f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/16\n" for r in range(8, 12))
    child = "[rank: 3] Child process with PID 61244 terminated with code -9. Forcefully terminating all other processes"
    verdict = judged(announced + child + "\n")
    assert suspects(verdict)[:1] == [11] and "on the node of ranks 8-11" in verdict.suspects[0].why
    everyone = "".join(f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/4\n" for r in range(4))
    assert suspects(judged(everyone + child + "\n"))[:1] == [3], "every node's announced: no node to place it on"


def test_srun_starting_a_launcher_on_each_node_ends_nodes_not_ranks() -> None:
    """``srun --ntasks-per-node=1 torchrun ...``: srun's task 1 is node-3's torchrun, not rank 1."""
    log = (
        "+ srun --nodes=2 --ntasks-per-node=1 torchrun --nnodes=2 --nproc_per_node=8 train.py\n"
        "srun: error: node-3: task 1: Exited with exit code 1\nsrun: error: node-2: task 0: Terminated\n"
    )
    verdict = judged(log)
    assert suspects(verdict) == [] and "task 1, the launcher on node-3, ended by exit code 1" in verdict.headline
    assert suspects(judged(log.split("\n", 1)[1]))[:1] == [1], "srun alone: a task a rank, if it started one so"


def test_sends_and_receives_numbered_apart_place_no_rank_behind() -> None:
    """A pipeline's sends and receives count each rank's own point-to-point work: ranks timing out in
    them at different numbers are no more behind one another than waiting; the rank with no wait is
    the one suspected."""

    def p2p(rank: int, guid: int, local: int, seq: int, op: str) -> str:
        return (
            f"[rank{rank}]:[E0301 10:40:10.0 ProcessGroupNCCL.cpp:632] [PG ID 2 PG GUID {guid}(pp) Rank {local}] "
            f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=8, "
            "NumelOut=8, Timeout(ms)=600000) ran for 600043 milliseconds before timing out.\n"
        )

    log = (
        p2p(0, 3, 0, 1201, "SEND")
        + p2p(2, 3, 1, 1188, "RECV")
        + p2p(1, 4, 0, 1201, "SEND")
        + p2p(3, 4, 1, 1102, "RECV")
    )
    verdict = judged(log + "[rank5]:  iteration     1200/  500000 | lm loss: 2.114E+00 |\n")
    assert verdict.culprits == [] and suspects(verdict)[:1] == [5], verdict.headline


def test_a_desync_report_naming_a_rank_shown_waiting_in_that_collective_is_not_the_worlds() -> None:
    """torch 2.1 prints no group's name: rank 0's report of its data-parallel group names its rank [1]
    (global 2) as never starting #801, while global rank 1's own line waits in #801; the report's
    ranks are its group's. Ranks waiting in groups no line names are placed against no peer; the
    rank shown not waiting with them is suspected."""

    def waits(rank: int, local: int, seq: int) -> str:
        return (
            f"[rank{rank}]:[E0301 10:40:30.0 ProcessGroupNCCL.cpp:475] [Rank {local}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) "
            "ran for 600043 milliseconds before timing out.\n"
        )

    report = (
        "[rank0]:[E0301 10:40:30.1 ProcessGroupNCCL.cpp:480] - [0] Timeout at collective: ALLREDUCE, #801\n"
        "[rank0]:   - [1] finished collective #800, but didn't join collective #801 (count from 1)\n"
    )
    log = waits(2, 0, 4001) + waits(0, 0, 801) + waits(4, 2, 801) + waits(1, 0, 801) + waits(5, 2, 801)
    log += report + "[rank3]: iteration 4000 | loss 2.31\n"
    verdict = judged(log)
    assert verdict.culprits == [] and suspects(verdict)[:1] == [3], verdict.headline
    assert "wait in groups no line names" in verdict.headline


def test_one_ranks_watchdog_stuck_beside_the_others_numbered_waits_is_suspected() -> None:
    """Ranks 0-2 time out in #57; rank 3's watchdog alone is stuck (no number: that it issued #57, no
    line shows): its own CUDA or NCCL call hung, not every rank's collective."""
    waits = "".join(
        f"[rank{r}]:[E0301 10:40:00.0 ProcessGroupNCCL.cpp:632] [PG ID 0 PG GUID 0(default_pg) Rank {r}] Watchdog "
        "caught collective operation timeout: WorkNCCL(SeqNum=57, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, "
        "Timeout(ms)=600000) ran for 600043 milliseconds before timing out.\n"
        for r in range(3)
    )
    stuck = (
        "[rank3]:[E0301 10:42:00.0 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 3] "
        "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued "
        "collectives.\n"
    )
    verdict = judged(waits + stuck)
    assert verdict.nobody is None and suspects(verdict) == [3] and "watchdog alone got stuck" in verdict.headline


def failures_table(host: str, ended: dict[int, int]) -> str:
    """torchrun's table of one node: each rank's exit code, the first its root cause."""

    def entry(n: int, rank: int, code: int) -> str:
        why = f"Signal {-code} ({signal.Signals(-code).name}) received by PID {4240 + rank}" if code < 0 else "<N/A>"
        return (
            f"[{n}]:\n  time      : 2024-05-02_10:14:31\n  host      : {host}\n  rank      : {rank} (local_rank: "
            f"{rank % 4})\n  exitcode  : {code} (pid: {4240 + rank})\n  error_file: <N/A>\n  traceback : {why}\n"
        )

    (root, code), *rest = ended.items()
    others = "".join(entry(n, rank, c) for n, (rank, c) in enumerate(rest, 1))
    return (
        f"E0502 10:14:31.2 2211 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: {code}) "
        f"local_rank: {root % 4} (pid: {4240 + root}) of binary: /usr/bin/python3\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n" + "=" * 60 + "\ntrain.py FAILED\n"
        f"{'-' * 60}\nFailures:\n{others}{'-' * 60}\nRoot Cause (first observed failure):\n"
        f"{entry(0, root, code)}{'=' * 60}\n"
    )


def test_every_rank_killed_in_the_same_second_is_no_ranks_fault() -> None:
    """torchrun's table: ranks 0-3 all SIGKILLed at 10:14:31, rank 0 its first observed failure only as the first
    it noticed: something outside killed them all (a memory limit, the scheduler). One rank of the four spared,
    or a rank waiting before, leaves it to the other rules."""
    said = judged(failures_table("gpu-node01", {r: -9 for r in range(4)})).nobody
    assert said is not None and "ranks 0-3 on gpu-node01 were all killed (SIGKILL) at once" in said
    assert judged(failures_table("gpu-node01", {0: -9, 1: -9, 2: -9, 3: 1})).nobody is None


def test_a_rank_torn_down_still_running_where_the_rest_aborted_together_is_the_one_they_waited_for() -> None:
    """Two nodes' tables: seven ranks ended by SIGABRT in the same second (their watchdogs, a collective timed out),
    rank 5 torn down by SIGTERM, still running: it is suspected, not the first to abort. Half the ranks torn down
    single none out."""
    node0 = failures_table("node0", {0: -6, 1: -6, 2: -6, 3: -6})
    verdict = judged(node0 + failures_table("node1", {4: -6, 5: -15, 6: -6, 7: -6}))
    assert verdict.nobody is None and suspects(verdict) == [5]
    assert "tore it down still running, while ranks 0-4, 6-7 aborted together" in verdict.suspects[0].why
    split = judged(node0 + failures_table("node1", {4: -6, 5: -15, 6: -15, 7: -15}))
    assert suspects(split)[:1] != [5], "three torn down beside five aborts: the aborts' timing, not a rank"
    assert all("if the job ran on one node" not in s.why for s in split.suspects), "the table names the ranks"


def test_a_rank_torchrun_closed_that_its_table_leaves_out_is_placed_by_the_tables_pids() -> None:
    """One node: seven ranks in the table ended by SIGABRT together, their pids one after another by rank; the
    agent closed pid 4244, which no row lists: rank 4's place in that order, torn down still running. A pid off
    the host's run of ranks places none."""
    aborted = failures_table("node0", {r: -6 for r in (0, 1, 2, 3, 5, 6, 7)})
    waits = "".join(
        f"[rank{r}]:[E ProcessGroupNCCL.cpp:523] [Rank {r}] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=15233, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600012 "
        "milliseconds before timing out.\n"
        for r in (0, 3)
    )
    for pid, expected in ((4244, [4]), (4299, [])):
        closing = (
            "W0502 10:14:30.9 2211 torch/distributed/elastic/multiprocessing/api.py:900] Sending process "
            f"{pid} closing signal SIGTERM\n"
        )
        verdict = judged(waits + closing + aborted)
        placed = [s for s in verdict.suspects if "tore it down" in s.why]
        assert [s.rank for s in placed] == expected, verdict.headline
        assert all(f"(pid {pid}: the table's pids, one after another by rank" in s.why for s in placed)


def test_a_hang_stopped_by_ctrl_c_suspects_the_rank_stopped_in_its_own_code() -> None:
    """torchrun's agent got Ctrl-C: rank 1's traceback stands in its own code, ranks 0 and 2 lost their peer in
    their collective. The stop is the person's; the hang it ended is rank 1's to answer for."""
    agent = (
        "W1206 15:52:29.658000 20052 torch/distributed/elastic/agent/server/api.py:753] Received 2 death signal, "
        "shutting down workers\n"
    )
    stopped = (
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "/job/train.py", line 43, in main\n'
        "[rank1]:     time.sleep(100000)\n"
        "[rank1]: KeyboardInterrupt\n"
    )
    lost = "".join(
        f"[rank{r}]: Traceback (most recent call last):\n"
        f'[rank{r}]:   File "/job/train.py", line 56, in main\n'
        f"[rank{r}]:     loss.backward()\n"
        f"[rank{r}]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
        "[127.0.0.1]:30941\n"
        for r in (0, 2)
    )
    verdict = judged(agent + stopped + lost)
    assert verdict.nobody is None and suspects(verdict) == [1] and "train.py:43" in verdict.suspects[0].why
    assert judged(agent + stopped).nobody is not None, "nobody lost it: the job was stopped, not hung"


def lost(rank: int, line: int, code: str) -> str:
    """Rank ``rank``'s traceback: it lost its peer at the script's line ``line``."""
    return (
        f"[rank{rank}]: Traceback (most recent call last):\n"
        f'[rank{rank}]:   File "/job/train.py", line {line}, in main\n'
        f"[rank{rank}]:     {code}\n"
        f"[rank{rank}]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
        "[127.0.0.1]:30941\n"
    )


def test_ranks_that_lost_a_peer_at_another_place_than_the_most_stood_elsewhere() -> None:
    verdict = judged(lost(0, 55, "loss.backward()") + lost(1, 51, "dist.barrier()") + lost(2, 55, "loss.backward()"))
    assert suspects(verdict)[:1] == [1] and "at /job/train.py:51 where ranks 0, 2" in verdict.suspects[0].why
    even = judged(lost(0, 55, "loss.backward()") + lost(1, 51, "dist.barrier()"))
    assert all("stood elsewhere" not in s.why for s in even.suspects), "one each: which is odd, no line says"


def test_the_peer_lost_is_a_rank_whose_lines_show_it_neither_failed_nor_waited() -> None:
    """torchrun's command says three processes; rank 2 printed a warning and left (sys.exit(0)): its peers lost it."""
    command = "$ torchrun --nproc-per-node 3 train.py\n"
    warned = "[rank2]:[W1206 16:00:02.0 reducer.cpp:1430] Warning: find_unused_parameters=True was specified\n"
    verdict = judged(command + warned + lost(0, 55, "loss.backward()") + lost(1, 55, "loss.backward()"))
    assert suspects(verdict) == [2] and "neither failed nor waited" in verdict.suspects[0].why
    world = analyzed(command + lost(0, 55, "loss.backward()"))
    assert (world.world, world.world_from) == (3, "the log"), "torchrun's command line: 3 a node, one node"
    assert analyzed("torchrun --nnodes 1:4 --nproc_per_node=8 train.py\n").world != 8, "a range of nodes: unknown"
    assert analyzed("torchrun --nnodes=2 --nproc_per_node=8 train.py\n" + lost(0, 55, "x")).world == 16


def test_a_rank_whose_own_lines_say_nothing_in_flight_while_others_wait_in_groups_is_suspected() -> None:
    """torch 2.6+: ranks 0-4 time out, each in a group the log names no members of; rank 5 is alive in its own code
    and prints the world group's dump signal with nothing in flight. Not the transport, not a deadlock of groups
    assumed to be the world's: rank 5."""

    def timeout(rank: int, guid: int, desc: str) -> str:
        return (
            f"[rank{rank}]:[E1124 03:12:40.2 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=4411, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) "
            f"ran for 600047 milliseconds before timing out.\n[rank{rank}]:[E1124 03:12:40.2 ProcessGroupNCCL.cpp:2271]"
            f" [PG ID 2 PG GUID {guid}({desc}) Rank 0]  failure detected by watchdog at work sequence id: 4411 PG "
            "status: last enqueued work: 4411, last completed work: 4410\n"
        )

    idle = (
        "[rank5]:[E1124 03:12:41.9 ProcessGroupNCCL.cpp:1746] [PG ID 0 PG GUID 0(default_pg) Rank 5] Received a dump "
        "signal due to a collective timeout from  rank 0 and we will try our best to dump the debug info. Last "
        "enqueued NCCL work: 212, last completed NCCL work: 212.\n"
    )
    waits = "".join(timeout(r, 9 + r, "DATA_PARALLEL_GROUP") for r in range(4)) + timeout(4, 29, "TENSOR_GROUP")
    verdict = judged(waits + idle)
    assert verdict.nobody is None and verdict.culprits == [] and suspects(verdict)[:1] == [5]
    assert "nothing in flight" in verdict.suspects[0].why


def test_a_time_limit_that_ended_a_hang_is_not_the_story_and_a_restarts_rendezvous_not_the_cause() -> None:
    waits = "".join(
        f"[rank{r}]:[E501 12:10:03.1 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=41876, OpType=BROADCAST, NumelIn=8, NumelOut=8, Timeout(ms)=1800000) ran for "
        "1800012 milliseconds before timing out.\n"
        for r in (0, 1, 2, 4, 5, 6, 7)
    )
    limit = "slurmstepd: error: *** STEP 77.0 ON node1 CANCELLED AT 2024-05-01T14:00:00 DUE TO TIME LIMIT ***\n"
    verdict = judged(waits + limit)
    assert verdict.nobody is None and suspects(verdict)[:1] == [3], "the hang the time limit ended: rank 3"
    rendezvous = (
        "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n"
        "[E1012 13:35:05.5 dynamic_rendezvous.py:1] The node 'worker-0' has failed to join the rendezvous: the "
        "rendezvous timed out\n"
    )
    crash = table(9, 1, -11).replace("To enable traceback see: https://pytorch.org", "Signal 11 (SIGSEGV) received")
    assert judged(rendezvous).nobody is not None, "a rendezvous that timed out alone: the set-up"
    assert (judged(crash + rendezvous).culprits or [9]) == [9], "after a crash, a restart's rendezvous is aftermath"


def test_a_log_of_torchruns_restarts_is_judged_on_its_last_attempt_the_earlier_said_apart() -> None:
    """Rank 3 ran out of memory in the first attempt; after torchrun restarted the workers, ranks 0, 2-3 time out
    while rank 1 says nothing: the last attempt's hang is rank 1's, rank 3's error an earlier attempt's. Where the
    last attempt shows nothing failing (cut from the paste, or it finished: that is said), the whole log is judged."""
    oom = (
        "[rank3]: Traceback (most recent call last):\n"
        '[rank3]:   File "/job/train.py", line 80, in step\n'
        "[rank3]:     loss.backward()\n"
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB.\n"
    )
    restart = (
        "I1012 08:14:02.5 1 torch/distributed/elastic/agent/server/api.py:857] [default] Worker group FAILED. 1/1 "
        "attempts left; will restart worker group\n"
    )
    waits = "".join(
        f"[rank{r}]:[E1012 08:27:40.1 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=418, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for "
        "600012 milliseconds before timing out.\n"
        for r in (0, 2, 3)
    )
    analysis = analyzed(oom + restart + waits)
    verdict = assign_blame(analysis)
    assert verdict.culprits == [] and suspects(verdict)[:1] == [1]
    [said] = analysis.log.restarts
    assert "restarted the workers once" in said and "rank 3 raised torch.OutOfMemoryError" in said
    assert "restarted the workers" in render_analysis(analysis)
    whole = analyzed(oom + restart)
    assert whole.log.restarts == [] and 3 in (assign_blame(whole).culprits or suspects(assign_blame(whole)))
    finished = (
        "I1012 09:40:00.1 1 torch/distributed/elastic/agent/server/api.py:594] Local worker group finished "
        "(WorkerState.SUCCEEDED). Waiting 300 seconds for other agents to finish\n"
    )
    recovered = analyzed(oom + restart + finished)
    [said] = recovered.log.restarts
    assert "restarted the workers once" in said and "the job recovered" in said, "the job's end is said"
    assert 3 in (assign_blame(recovered).culprits or suspects(assign_blame(recovered))), "what failed, still judged"


def test_a_pipeline_stage_absent_from_the_log_while_the_others_wait_in_sends_and_receives_is_suspected() -> None:
    def passing(rank: int, op: str) -> str:  # each rank numbers its own sends and receives
        seq = 40 + rank * 7
        return (
            f"[rank{rank}]:[E1124 03:12:40.2 ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective "
            f"operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran "
            f"for 600047 milliseconds before timing out.\n[rank{rank}]:[E1124 03:12:40.2 ProcessGroupNCCL.cpp:2271] "
            f"[PG ID 6 PG GUID 7(PIPELINE_MODEL_PARALLEL_GROUP) Rank {rank}]  failure detected by watchdog at work "
            f"sequence id: {seq} PG status: last enqueued work: {seq}, last completed work: {seq - 1}\n"
        )

    launch = "torchrun --nproc_per_node=4 pipeline.py\n"
    verdict = judged(launch + passing(0, "RECV") + passing(1, "SEND") + passing(3, "RECV"))
    assert verdict.nobody is None and suspects(verdict) == [2] and verdict.suspects[0].why == "no line in the log"


def test_a_ranks_own_dataloader_timeout_is_its_own_failure_not_a_lost_peer() -> None:
    raised = (
        "[rank2]: Traceback (most recent call last):\n"
        '[rank2]:   File "/venv/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 1133, in _get_data\n'
        "[rank2]:     raise RuntimeError(f'DataLoader timed out after {self._timeout} seconds')\n"
        "[rank2]: RuntimeError: DataLoader timed out after 300 seconds\n"
    )
    verdict = judged(raised)
    assert (verdict.culprits or suspects(verdict))[:1] == [2], "its worker hung: rank 2's, no peer of its lost"


def test_srun_telling_a_task_out_of_memory_sets_it_apart_from_those_killed_with_it() -> None:
    waits = "".join(
        f"{r}: [rank{r}]:[E501 12:10:40.1 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=5120, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for "
        "600012 milliseconds before timing out.\n"
        for r in (0, 1, 2, 3, 6, 7)
    )
    ends = "srun: error: gpu-b12: task 5: Out Of Memory\nsrun: error: gpu-b12: tasks 4,6-7: Killed\n"
    verdict = judged(waits + ends)
    assert suspects(verdict)[:1] == [5] and "signal 9 (Out Of Memory)" in verdict.suspects[0].why


def test_the_drivers_xid_on_a_gpu_names_the_rank_nccl_put_on_it() -> None:
    """``NVRM: Xid (PCI:0000:5d:00): 79`` is the GPU of NCCL's ``busId 5d000``: rank 7's, the one rank no watchdog
    line shows; where the dmesg line names no host and both nodes have that bus, each of their ranks alike."""
    members = "".join(
        f"[rank{r}]:gpu-node-0{1 + r // 4}:{4100 + r % 4}:{4100 + r % 4} [{r % 4}] NCCL INFO comm 0x55d0 rank {r} "
        f"nranks 8 cudaDev {r % 4} nvmlDev {r % 4} busId {('18', '2a', '3a', '5d')[r % 4]}000 commId 0x8f2e - Init "
        "COMPLETE\n"
        for r in range(8)
    )
    waits = "".join(
        f"[rank{r}]:[E501 04:40:00.1 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=2207, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for "
        "600012 milliseconds before timing out.\n"
        for r in range(7)
    )
    xid = "[Wed May  1 04:29:58 2024] NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen "
    xid += "off the bus.\n"
    verdict = judged(members + waits + xid)
    assert suspects(verdict)[:2] == [7, 3] and "Xid 79" in verdict.suspects[0].why
    assert verdict.leading == [7], "rank 7 also printed no watchdog line"
    every = judged(members + waits + waits.replace("[rank0]", "[rank7]").replace("[Rank 0]", "[Rank 7]") + xid)
    assert every.nobody is None and every.leading == [3, 7], "every rank waits: the GPU's rank, not the transport"


def test_a_rank_whose_traceback_the_paste_cuts_inside_a_collective_waited_and_is_no_suspect() -> None:
    """Ranks 0-1 time out in all-reduce #9120; rank 2's traceback is cut inside ``dist.all_reduce``'s
    ``work.wait()``: it waited too, so of four ranks the one absent, rank 3, is suspected, and rank 2 is said to
    stand in that collective, not "never heard from"."""
    waits = "".join(
        f"[rank{r}]:[E ProcessGroupNCCL.cpp:563] [Rank {r}] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=9120, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=1800000) ran for 1800042 "
        "milliseconds before timing out.\n"
        for r in (0, 1)
    )
    cut = "".join(
        f"[rank2]:{line}\n"
        for line in (
            "Traceback (most recent call last):",
            '  File "/workspace/train.py", line 210, in main',
            "    reduce_metrics(stats)",
            '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 2221, in '
            "all_reduce",
            "    work.wait()",
        )
    )
    launch = "torchrun --nproc_per_node=4 train.py\n"
    analysis = analyzed(launch + waits + cut)
    verdict = assign_blame(analysis)
    assert suspects(verdict) == [3], verdict.headline
    assert "ends in all_reduce (distributed_c10d.py:2221)" in analysis.missing[2]
    assert "rank 2: no evidence" in render_analysis(analysis) and "it waited in a collective" in render_analysis(
        analysis
    )


def test_an_exception_the_log_places_on_no_rank_is_said_with_the_ranks_it_may_be() -> None:
    """Each pod's log pasted under a header, no rank prefix: ranks 0-1 time out, and a traceback of a worker
    that is neither: it is one of the ranks absent, said with them, not dropped (one absent: that one)."""
    waits = "".join(
        f"[E ProcessGroupNCCL.cpp:821] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9981, "
        "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800498 milliseconds before timing out.\n"
        for r in (0, 1)
    )
    raised = (
        "Traceback (most recent call last):\n"
        '  File "/opt/app/train.py", line 231, in main\n'
        "    for step, batch in enumerate(train_loader):\n"
        "RuntimeError: DataLoader worker (pid(s) 2231) exited unexpectedly\n"
    )
    for world, absent in ((4, [2, 3]), (3, [2])):
        verdict = judged(f"torchrun --nproc_per_node={world} train.py\n" + waits + raised)
        assert suspects(verdict) == absent, verdict.headline
        assert all(
            "DataLoader worker (pid(s) 2231) exited unexpectedly raised with no rank" in s.why for s in verdict.suspects
        )


def test_the_pid_the_oom_killer_names_is_the_rank_the_deepspeed_launcher_started_as_it() -> None:
    """One node: DeepSpeed's launcher prints each worker's pid and ``--local_rank``; the kernel killed pid 41202,
    local rank 1, which the node's one mapping makes rank 1. With two nodes mapped, the pid places no rank."""
    spawned = "".join(
        f"[2024-05-01 11:58:40,10{r}] [INFO] [launch.py:256:main] process 4120{r} spawned with command: "
        f"['/usr/bin/python', '-u', 'train.py', '--local_rank={r}', '--deepspeed', 'ds_config.json']\n"
        for r in range(4)
    )
    killed = "[Wed May  1 12:40:12 2024] Out of memory: Killed process 41201 (python) total-vm:182344120kB\n"
    for nodes, placed in (("{'localhost': [0, 1, 2, 3]}", [1]), ("{'n1': [0, 1, 2, 3], 'n2': [4, 5, 6, 7]}", [])):
        mapping = f"[INFO] [launch.py:163:main] global_rank_mapping=defaultdict(<class 'list'>, {nodes})\n"
        verdict = judged(mapping + spawned + killed)
        assert [s.rank for s in verdict.suspects if "OOM killer" in s.why] == placed, verdict.headline


def test_a_rank_lightning_never_announced_while_the_job_hangs_at_init_is_suspected() -> None:
    """Lightning prints each process's ``Initializing distributed`` before init_process_group: rank 6's is not in
    the log and the job hangs there, so rank 6 is where to look. Ranks that failed or waited, or most of the world
    unannounced (the paste cut), leave it to the other rules."""
    announced = "".join(f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/8\n" for r in range(8) if r != 6)
    verdict = judged(announced)
    assert suspects(verdict) == [6] and "never reached init_process_group" in verdict.suspects[0].why
    few = "".join(f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/8\n" for r in range(3))
    assert not any("never reached init" in s.why for s in judged(few).suspects)


def test_a_wait_whose_line_gives_no_number_is_shown_without_one() -> None:
    """torch <=1.10's watchdog lines carry no SeqNum: where each rank stood says so, not ``#1``."""
    waits = "".join(
        f"[E ProcessGroupNCCL.cpp:587] [Rank {r}] Watchdog caught collective operation timeout: "
        "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800412 milliseconds before timing out.\n"
        for r in range(4)
    )
    shown = render_analysis(analyzed(waits))
    assert "ranks 0-3: waits in all_reduce (its number not in the log) of group 0" in shown and "#1" not in shown


def test_fairseqs_table_of_the_workers_gradient_norms_names_the_odd_rank_not_the_one_that_raised() -> None:
    """Rank 0 raised fairseq's ``gradients are inconsistent between workers``; its table shows rank 6's norm nan,
    the seven others alike: rank 6's gradients are its own. Half the ranks apart names none."""

    def raised(norms: list[str]) -> str:
        rows = "".join(f"[rank0]:rank {r:3d} = {n}\n" for r, n in enumerate(norms))
        return (
            "[rank0]: FloatingPointError: Fatal error: gradients are inconsistent between workers. Try "
            "--ddp-backend=legacy_ddp. Or are you mixing up different generation of GPUs in training?\n"
            f"[rank0]:{'-' * 80}\n[rank0]:grad_norm across the workers:\n{rows}[rank0]:\n[rank0]:{'-' * 80}\n"
        )

    verdict = judged(raised(["0.81221455"] * 6 + ["nan", "0.81221455"]))
    assert verdict.culprits == [6] and "had a gradient norm of nan where the other 7 ranks'" in verdict.headline
    assert 6 not in judged(raised(["0.8"] * 4 + ["nan"] * 4)).culprits


def test_megatrons_nan_check_on_one_rank_while_the_others_wait_is_that_ranks_not_every_ranks() -> None:
    """Megatron checks a rank's gradient norm before the ranks share gradients: rank 3 found NaN while ranks 0-2
    wait in the all-reduce past their own check, so rank 3's numbers are its own (its batch, its GPU). Where no
    rank is shown waiting, the NaN is said as the training's, every rank's."""
    nan = (
        "[rank3]: Traceback (most recent call last):\n"
        '[rank3]:   File "/mlm/megatron/core/distributed/param_and_grad_buffer.py", line 114, in start_grad_sync\n'
        "[rank3]:     assert not norm.isnan(), (\n"
        "[rank3]: AssertionError: Rank 3: found NaN in local grad norm in backward pass before data-parallel "
        "communication collective. Device: 3, node: node-a\n"
    )
    waits = "".join(
        f"[rank{r}]:[E1105 03:13:03.0 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=27951, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for "
        "600012 milliseconds before timing out.\n"
        for r in range(3)
    )
    analysis = analyzed(nan + waits)
    assert assign_blame(analysis).culprits == [3]
    [found] = evidence(analysis, [3])
    assert "its batch" in found.next_step and "its GPU" in found.next_step
    nobody = judged(nan).nobody
    assert nobody is not None and "the training's numbers diverged" in nobody


def test_what_a_dataloader_worker_raised_is_told_not_the_main_process_re_raising_it() -> None:
    """torch re-raises a worker's error in the main process (``Caught OSError in DataLoader worker process 3.``)
    with the worker's own traceback after it: its exception and frames are the rank's to tell."""
    lines = [
        "Traceback (most recent call last):",
        '  File "/job/train.py", line 117, in main',
        "    for batch in loader:",
        '  File "/py/torch/_utils.py", line 694, in reraise',
        "    raise exception",
        "OSError: Caught OSError in DataLoader worker process 3.",
        "Original Traceback (most recent call last):",
        '  File "/py/torch/utils/data/_utils/worker.py", line 308, in _worker_loop',
        "    data = fetcher.fetch(index)",
        '  File "/job/dataset.py", line 42, in __getitem__',
        "    image = Image.open(path).convert('RGB')",
        "OSError: image file is truncated (17 bytes not processed)",
        "",
    ]
    raised = analyzed("".join(f"[rank2]:{line}\n" for line in lines)).log.raised[2]
    assert (raised.type, raised.message) == (
        "OSError",
        "image file is truncated (17 bytes not processed) (in DataLoader worker process 3)",
    )
    assert [f.func for f in raised.frames][-2:] == ["_worker_loop", "__getitem__"]


def test_ranks_built_against_different_nccls_are_the_installation_not_a_misuse() -> None:
    """NCCL's ``Mismatched NCCL version detected`` (which it returns as an invalid usage): the nodes' NCCLs
    differ, said in releases, with what to install; not the program's device assignment."""
    lines = "".join(
        f"gpu-node01:4187{r}:4187{r} [{r}] init.cc:743 NCCL WARN Mismatched NCCL version detected : rank 4 version "
        f"22105 rank {r} version 21801\n"
        for r in range(2)
    )
    nobody = judged(
        lines + "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, invalid "
        "usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.18.1\n"
    ).nobody
    assert nobody is not None and "rank 4 NCCL 2.21.5, rank 0 NCCL 2.18.1" in nobody and "install one NCCL" in nobody
    assert "device assignment" not in nobody


def test_tasks_that_failed_differently_are_not_alike_where_no_label_places_their_words() -> None:
    """Under srun's labels (tasks, not ranks): task 0's store could not listen (its port taken), tasks 1-3 timed out
    reaching it; srun says all four exited 1. Their words differ: the store's set-up, not "failed alike"."""
    frame = (
        '{}: Traceback (most recent call last):\n{}:   File "/py/torch/distributed/rendezvous.py", line 198, in _c\n'
    )
    server = frame.format(0, 0) + (
        "0: torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
        "address. useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use\n"
    )
    clients = "".join(
        frame.format(t, t) + f"{t}: torch.distributed.DistNetworkError: The client socket has timed out after 1800s "
        "while trying to connect to (10.10.0.11, 29500).\n"
        for t in (1, 2, 3)
    )
    exits = "srun: error: n1: task 0: Exited with exit code 1\nsrun: error: n2: tasks 1-3: Exited with exit code 1\n"
    nobody = judged(server + clients + exits).nobody
    assert nobody is not None and "failed alike" not in nobody and "could not listen on its port" in nobody


def test_one_failure_rewrapped_by_a_library_is_alike_its_unwrapped_self() -> None:
    """Horovod re-raises NCCL's failure as HorovodInternalError with the same words: rank 0's paste kept the wrapper,
    rank 1's the original; they failed alike. Two short messages of two types are not one failure."""

    def raised(rank: int, exception: str) -> str:
        lines = ["Traceback (most recent call last):", '  File "/w/train.py", line 149, in <module>', exception]
        return "".join(f"[1,{rank}]<stderr>:{line}\n" for line in lines)

    wrapped = "horovod.common.exceptions.HorovodInternalError: ncclBroadcast failed: unhandled cuda error"
    bare = "RuntimeError: ncclBroadcast failed: unhandled cuda error"
    nobody = judged(raised(0, wrapped) + raised(1, bare)).nobody
    assert nobody is not None and "ranks 0-1 failed alike" in nobody
    assert judged(raised(0, "KeyError: 'x'") + raised(1, "IndexError: 'x'")).nobody is None
    cut = judged(raised(0, bare) + raised(1, "RuntimeError: ncclBroad")).nobody
    assert cut is not None and "ranks 0-1 failed alike" in cut, "rank 1's line cut where the paste ends"
    assert judged(raised(0, bare) + raised(1, "RuntimeError: nc")).nobody is None, "too little to say the same"


def test_what_the_log_does_not_show_of_the_peers_is_not_said() -> None:
    """A rank's CUDA out-of-memory alone in the paste: its peers' memory is not said to have held (only where they
    are shown waiting or going on). A rank the launcher's table alone shows ended is said to have ended so, not
    "never heard from"."""
    oom = (
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "/job/train.py", line 80, in step\n'
        "[rank0]:     loss.backward()\n"
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB.\n"
    )
    [alone] = evidence(analyzed(oom), [0])
    assert "its GPU ran out of memory: another process" in alone.next_step
    waits = "".join(
        f"[rank{r}]:[E1012 08:27:40.1 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=418, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for "
        "600012 milliseconds before timing out.\n"
        for r in (1, 2)
    )
    [beside] = evidence(analyzed(oom + waits), [0])
    assert "its GPU ran out of memory, its peers' did not" in beside.next_step
    shown = render_analysis(analyzed(failures_table("n1", {0: 1, 1: 1, 2: 1, 3: 1})))
    assert "(only torchrun's word on how it ended): ended by exit code 1" in shown


def test_a_rank_read_from_a_log_at_odds_with_its_peers_has_no_live_monitors_step_or_stack_words() -> None:
    """Rank 1 issued a reduce-scatter where ranks 0, 2-3 issued an all-gather: named, without the live
    monitor's words on its step and stack, which a log does not give."""
    waits = "".join(
        f"[rank{r}]:[E0514 10:25:04.1 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
        f"timeout: WorkNCCL(SeqNum=412877, OpType={op}, NumelIn=8, NumelOut=8, Timeout(ms)=1800000) ran for "
        "1800012 milliseconds before timing out.\n"
        for r, op in (
            (0, "_ALLGATHER_BASE"),
            (1, "_REDUCE_SCATTER_BASE"),
            (2, "_ALLGATHER_BASE"),
            (3, "_ALLGATHER_BASE"),
        )
    )
    analysis = analyzed(waits)
    assert assign_blame(analysis).culprits == [1]
    shown = render_analysis(analysis)
    assert "rank 1 issued _reduce_scatter_base" in shown and "no stack" not in shown and "step 0" not in shown


def test_a_rank_only_a_launcher_says_aborted_beside_a_timeout_is_said_so_not_silent() -> None:
    """Two ranks: rank 0 times out in all-reduce #51207; torchrun's table says rank 1 ended by SIGABRT, as a
    watchdog ends a rank that timed out: suspected with that word, not as a rank of which no line says anything."""
    wait = (
        "[E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=51207, "
        "OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=1800000) ran for 1800461 milliseconds before timing "
        "out.\n"
    )
    verdict = judged(wait + failures_table("n1", {1: -6, 0: -6}))
    assert (
        suspects(verdict)[:1] == [1]
        and "torchrun says it ended by SIGABRT, as a watchdog ends" in verdict.suspects[0].why
    )


def test_a_file_whose_name_is_one_ranks_output_places_its_lines_on_that_rank(tmp_path: Path) -> None:
    """Open MPI's ``--output-filename`` (``out/1/rank.13/stderr``) and Azure ML's ``std_log_process_13.txt``: the
    file's exception, under no prefix, is rank 13's; another name places none."""
    raised = (
        "Traceback (most recent call last):\n"
        '  File "/job/train.py", line 80, in step\n'
        "    loss.backward()\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB.\n"
    )
    for name, rank in (("out/1/rank.13/stderr", 13), ("user_logs/std_log_process_13.txt", 13), ("node1.log", None)):
        folder = tmp_path / name.replace("/", "_")
        (folder / name).parent.mkdir(parents=True)
        (folder / name).write_text(raised)
        assert list(analyze([str(folder)]).log.raised) == ([rank] if rank is not None else []), name


def test_a_first_collective_never_completed_over_shared_memory_says_to_check_dev_shm() -> None:
    """The first all-gather never completed and NCCL's lines show it connected through shared memory: /dev/shm is
    among what to check; without such a line it is not said."""
    waits = "".join(
        f"[rank{r}]:[E1124 03:12:44.5 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=1, OpType=ALLGATHER, NumelIn=8, NumelOut=16, Timeout(ms)=1800000) ran for 1800060 "
        "milliseconds before timing out.\n"
        for r in (0, 1)
    )
    shm = "node3:18841:18925 [0] NCCL INFO Channel 00 : 0[1a000] -> 1[1b000] via SHM/direct/direct\n"
    said = judged(shm + waits).nobody
    assert said is not None and "never completed" in said and "/dev/shm" in said
    assert "/dev/shm" not in (judged(waits).nobody or "")


def test_a_rank_whose_own_lines_say_its_training_ended_while_the_others_wait_left_early() -> None:
    """torchtitan's rank 6 ran out of data and ended its loop while ranks 0-5, 7 wait in an all-gather: it is
    suspected as having left early (uneven data), with its own words."""
    waits = "".join(
        f"[rank{r}]:[E302 10:16:21.0 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=86704, OpType=_ALLGATHER_BASE, NumelIn=8, NumelOut=64, Timeout(ms)=600000) ran "
        "for 600012 milliseconds before timing out.\n"
        for r in (0, 1, 2, 3, 4, 5, 7)
    )
    left = (
        "[rank6]:[titan] 2025-03-02 10:14:41,018 - root - WARNING - Ran out of data; last step was canceled.\n"
        "[rank6]:[titan] 2025-03-02 10:14:41,019 - root - INFO - Training completed\n"
    )
    verdict = judged(left + waits)
    assert suspects(verdict)[:1] == [6] and "its own lines say its training ended" in verdict.suspects[0].why


def test_a_rank_that_could_not_take_its_gpu_is_the_launchs_doing_not_the_rank() -> None:
    """Rank 5's traceback ends in torch.cuda's set_device, its exception line cut from the paste, or saying CUDA
    was started before a fork: every rank takes its GPU alike, so nobody is to blame, and what to check is said.
    A GPU's own fault raised there, or the same rank beside another rank waiting, is not cleared so."""
    frames = (
        "[rank5]: Traceback (most recent call last):\n"
        '[rank5]:   File "/work/finetune.py", line 40, in <module>\n'
        "[rank5]:     torch.cuda.set_device(int(os.environ['RANK']))\n"
        '[rank5]:   File "/opt/venv/lib/python3.12/site-packages/torch/cuda/__init__.py", line 567, in set_device\n'
        "[rank5]:     torch._C._cuda_setDevice(device)\n"
    )
    cut = judged(frames).nobody
    assert cut is not None and "could not take its GPU" in cut and "--nproc-per-node" in cut
    forked = judged(frames + "[rank5]: RuntimeError: Cannot re-initialize CUDA in forked subprocess.\n").nobody
    assert forked is not None and "re-initialize CUDA" in forked
    faulty = judged(frames + "[rank5]: RuntimeError: CUDA error: uncorrectable ECC error encountered\n")
    assert faulty.nobody is None and 5 in faulty.culprits + suspects(faulty)
    waits = (
        "[rank2]:[E0611 08:01:02.3 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=4, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600031 "
        "milliseconds before timing out.\n"
    )
    assert judged(frames + waits).nobody is None
    nameless = frames.replace("[rank5]: ", "")
    said = judged("world_size 4\n" + nameless).nobody
    assert said is not None and said.startswith("a process could not take its GPU"), "no label: a process's"
    assert judged(nameless + waits).nobody is None


def test_a_rank_failing_while_torch_compile_compiles_is_every_ranks_compilation_not_the_rank() -> None:
    """Rank 2's traceback is cut in Inductor building its C++, or rank 0's ends in Dynamo's Unsupported raised
    converting a frame: every rank compiles the same model alike, so nobody is to blame. Not so beside a rank
    waiting, for an out-of-memory raised there, nor for a compiled model's run (no frame of compilation)."""
    inductor = "/venv/lib/python3.12/site-packages/torch/_inductor/cpp_builder.py"
    cut = (
        "[rank2]: Traceback (most recent call last):\n"
        '[rank2]:   File "/work/train.py", line 61, in <module>\n'
        "[rank2]:     loss = model(x).sum()\n"
        f'[rank2]:   File "{inductor}", line 331, in _run_compile_cmd\n'
        "[rank2]:     subprocess.check_output(args)\n"
    )
    said = judged(cut).nobody
    assert said is not None and "failed while torch.compile compiled (_run_compile_cmd in cpp_builder.py" in said
    dynamo = "".join(
        f"[rank0]: {line}\n"
        for line in (
            "Traceback (most recent call last):",
            '  File "/work/train.py", line 61, in <module>',
            '  File "/venv/lib/python3.12/site-packages/torch/_dynamo/convert_frame.py", line 1092, in _compile',
            '  File "/venv/lib/python3.12/site-packages/torch/_dynamo/symbolic_convert.py", line 912, in step',
            "torch._dynamo.exc.Unsupported: call_function all_to_all_single in skip_files",
        )
    )
    said = judged(dynamo).nobody
    assert said is not None and "(_compile in convert_frame.py: torch._dynamo.exc.Unsupported" in said
    assert judged(cut + first_watchdog(1, 4, "ALLREDUCE")).nobody is None, (
        "another rank waited for it: it compiled alone"
    )
    oom = dynamo.replace("torch._dynamo.exc.Unsupported: call_function", "torch.OutOfMemoryError: CUDA out of memory")
    assert "torch.compile" not in str(judged(oom).nobody), "its GPU's memory: a rank may meet it alone"
    running = dynamo.replace("convert_frame.py", "eval_frame.py").replace("Unsupported", "TorchRuntimeError")
    assert "torch.compile" not in str(judged(running).nobody), "a compiled model's run is no compilation"


def test_a_rank_failing_ddps_own_check_of_the_model_is_every_ranks_program() -> None:
    """Rank 3's traceback is cut where DDP raises its own check of the model or its arguments (``_log_and_throw``),
    or ends in the check's error: every rank builds the same DDP. Not so beside a rank waiting."""
    ddp = "/venv/lib/python3.10/site-packages/torch/nn/parallel/distributed.py"
    cut = "".join(
        f"[rank3]: {line}\n"
        for line in (
            "Traceback (most recent call last):",
            '  File "/work/train.py", line 90, in <module>',
            "    model = DDP(model, device_ids=[rank])",
            f'  File "{ddp}", line 739, in __init__',
            "    self._log_and_throw(",
            f'  File "{ddp}", line 1127, in _log_and_throw',
            "    raise err_type(err_msg)",
        )
    )
    said = judged(cut).nobody
    assert said is not None and "failed DistributedDataParallel's own check" in said
    whole = cut + "[rank3]: RuntimeError: Modules with uninitialized parameters can't be used with DDP.\n"
    said = judged(whole).nobody
    assert said is not None and "(RuntimeError: Modules with uninitialized parameters" in said
    assert judged(cut + first_watchdog(1, 4, "ALLREDUCE")).nobody is None, (
        "another rank waited for it: not every rank's"
    )


def test_a_distributed_checkpoints_plan_failing_is_every_ranks_checkpoint_not_the_rank_and_no_wait() -> None:
    """Rank 5 prints DCP's CheckpointException: rank 1's planning error under ``(RANK 1)``, cut before its
    exception line, then rank 6's whole: every rank plans its load against the same checkpoint, so nobody is to
    blame (rank 6's plan said whose), rank 0's exit code in torchrun's table being DCP's raise on it too, and a
    rank cut in DCP's own code is no waiter. Not so beside a rank killed or waiting, nor for a rank held in a
    collective of DCP's (its innermost frames in distributed_c10d.py): that one waits."""
    dcp = "/venv/lib/python3.11/site-packages/torch/distributed/checkpoint"

    def planned(rank: int, exception: str = "") -> str:
        lines = [
            f"Traceback (most recent call last): (RANK {rank})",
            f'  File "{dcp}/utils.py", line 192, in reduce_scatter',
            "    local_data = map_fun()",
            f'  File "{dcp}/state_dict_loader.py", line 250, in local_step',
            "    local_plan = planner.create_local_plan()",
            f'  File "{dcp}/default_planner.py", line 233, in create_local_plan',
            "    return create_default_local_load_plan(",
        ]
        return "".join(f"[rank5]: {line}\n" for line in [*lines, *([exception] if exception else [])])

    text = planned(1) + planned(6, "RuntimeError: Missing key in checkpoint state_dict: layers.3.weight.")
    said = judged(text).nobody
    assert said is not None and "rank 5 failed as a distributed checkpoint planned its load (local_step, " in said
    assert "rank 6's plan, as its CheckpointException says; RuntimeError: Missing key" in said, "whose, as DCP says"
    assert judged(planned(1)).nobody is not None, "cut before its exception line: still the plan's"
    whole = text.replace(
        "[rank5]: Traceback (most recent call last): (RANK 6)\n",
        "[rank5]: Traceback (most recent call last): (RANK 6)\n"
        f'[rank5]:   File "{dcp}/state_dict_loader.py", line 70, in load\n',
    )
    assert "planned its load (local_step, " in str(judged(whole).nobody), "the step, not the loader's outer call"
    said = judged(text + table(0, 0, 1)).nobody
    assert said is not None and said.startswith("ranks 0, 5 failed as"), "rank 0's exit code: DCP raised there too"
    assert judged(text + table(0, 0, -9)).nobody is None, "rank 0 killed: apart from the plan"
    assert judged(text + first_watchdog(2, 8, "ALLREDUCE")).nobody is None, "another rank waited for it"
    waiting = planned(3).replace(
        "    return create_default_local_load_plan(\n",
        f'    return create_default_local_load_plan(\n[rank5]:   File "{dcp}/utils.py", line 80, in scatter_object\n'
        '[rank5]:   File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3200, in '
        "scatter_object_list\n",
    )
    assert judged(waiting).nobody is None, "held in DCP's collective: a waiter, not a plan that failed"


def test_records_a_terminal_padded_and_joined_are_read_apart() -> None:
    """A copy of a terminal that joined its lines, each padded with spaces to the terminal's width: each record,
    its time first, is a line of its own, a traceback's frames among them."""
    stamp = "2025-03-01 10:00:0{} - trainer - INFO - [rank{}]: "
    lines = [
        "Traceback (most recent call last):",
        '  File "/work/train.py", line 20, in <module>',
        "    trainer.load()",
        "ValueError: checkpoint has no step",
    ]
    padded = "".join(f"{stamp.format(i, 2)}{line}".ljust(120) for i, line in enumerate(lines)) + "\n"
    written = [w.text for w in lines_as_written(io.StringIO(padded))]
    assert [w.split(" - INFO - ", 1)[-1].rstrip() for w in written] == [f"[rank2]: {line}" for line in lines]
    assert str(judged(padded).nobody).startswith("rank 2 raised ValueError: checkpoint has no step"), (
        "its traceback read"
    )


def test_a_traceback_cut_in_fsdps_own_code_is_no_wait_and_a_cut_exception_is_not_said_as_anothers() -> None:
    """Rank 3's traceback is cut inside FSDP2's copy out of the all-gathered buffer (where it allocates), rank 1's
    shows only its out-of-memory line: rank 3 is no waiter that would prove rank 1 at fault, and the headline says
    rank 1's exception as rank 1's alone, rank 3's as cut."""
    fsdp = "/opt/venv/lib/python3.12/site-packages/torch/distributed/_composable/fsdp/_fsdp_param_group.py"
    cut = (
        "[rank3]: Traceback (most recent call last):\n"
        '[rank3]:   File "/work/train.py", line 88, in <module>\n'
        "[rank3]:     loss = model(batch).sum()\n"
        f'[rank3]:   File "{fsdp}", line 301, in pre_forward\n'
        "[rank3]:     self.wait_for_unshard()\n"
        f'[rank3]:   File "{fsdp}", line 257, in wait_for_unshard\n'
        "[rank3]:     foreach_all_gather_copy_out(\n"
        '[rank3]:   File "/opt/venv/lib/python3.12/site-packages/torch/utils/_contextlib.py", line 116, in '
        "decorate_context\n"
        "[rank3]:     return func(*args, **kwargs)\n"
    )
    oom = (
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity\n"
    )
    elsewhere = (  # rank 2's, cut in its own code: on no one path with rank 3's, so not alike
        "[rank2]: Traceback (most recent call last):\n"
        '[rank2]:   File "/work/train.py", line 91, in <module>\n'
        "[rank2]:     optimizer.step()\n"
    )
    verdict = judged(oom + cut + elsewhere)
    assert verdict.culprits == [] and suspects(verdict) == [1, 2, 3], verdict.headline
    assert verdict.headline.startswith(
        "rank 1 raised torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total "
        "capacity; ranks 2-3 raised an exception: its exception line is not in the log"
    ), verdict.headline


def test_a_node_all_of_whose_ranks_are_silent_while_another_nodes_wait_is_named_as_a_whole() -> None:
    """NCCL's lines place ranks 0-1 on node-a and 2-3 on node-b; node-b's ranks wait and node-a's say nothing: node-a
    is suspected as a whole, rank 0 with it (busy alone, its node-mate would have waited and said so). A line of
    rank 1's makes node-a no silent node: rank 0 is suspected by its habit again."""
    placed = "".join(
        f"{host}:{1000 + r}:{1100 + r} [{r % 2}] NCCL INFO comm 0x55d0 rank {r} nranks 4 cudaDev {r % 2} busId "
        f"{r % 2}000 - Init COMPLETE\n"
        for r, host in ((0, "node-a"), (1, "node-a"), (2, "node-b"), (3, "node-b"))
    )
    waits = "".join(
        f"[rank{r}]:[E1206 10:00:01.0 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=900, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600012 "
        "milliseconds before timing out.\n"
        for r in (2, 3)
    )
    verdict = judged(placed + waits)
    assert verdict.leading == [0, 1], verdict.headline
    assert "every rank NCCL's lines place on node-a (ranks 0-1) is silent while the ranks on node-b wait" in (
        verdict.suspects[0].why
    )
    spoke = judged(placed + waits + "[rank1]: loading shard 3 of 8\n")
    assert all("node-a" not in s.why for s in spoke.suspects) and "works alone" in spoke.suspects[-1].why


def test_a_traceback_the_paste_cut_at_its_head_and_one_cut_at_its_tail_may_be_one_stack() -> None:
    """Rank 1 ran out of memory, its traceback's head cut from the paste (it begins inside the model); rank 3's
    begins at the script and is cut as it called the model: the two share no frame, windows of one stack, so the
    ranks failed alike. Both begun at the script and parted on different lines, they did not."""
    inner = (
        '[rank1]:   File "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py", line 125, in forward\n'
        "[rank1]:     return F.linear(input, self.weight, self.bias)\n"
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB.\n"
    )
    outer = (
        "[rank3]: Traceback (most recent call last):\n"
        '[rank3]:   File "/work/train.py", line 60, in <module>\n'
        "[rank3]:     main()\n"
        '[rank3]:   File "/work/train.py", line 52, in main\n'
        "[rank3]:     loss = step(model, batch)\n"
        '[rank3]:   File "/work/train.py", line 31, in step\n'
        "[rank3]:     logits = model(batch)\n"
    )
    nobody = judged(inner + outer).nobody
    assert nobody is not None and "ranks 1, 3 failed alike (torch.OutOfMemoryError: CUDA out of memory)" in nobody
    begun = inner.replace(
        "[rank1]:   File",
        '[rank1]: Traceback (most recent call last):\n[rank1]:   File "/work/train.py", line 60, '
        "in <module>\n[rank1]:     main()\n[rank1]:   File",
        1,
    )
    parted = outer.replace("line 31, in step", "line 44, in save").replace("logits = model(batch)", "torch.save(m, p)")
    assert judged(begun + parted).nobody is None


def test_a_librarys_internal_assert_beside_a_traceback_cut_on_its_path_is_met_alike() -> None:
    """Rank 0 tripped torch's own check (``INTERNAL ASSERT FAILED``) in backward; rank 1's traceback, cut before its
    exception line, stands on the same path: the code every rank runs trips it, nobody is to blame."""
    path = (
        '[rank{r}]:   File "/work/train.py", line 70, in <module>\n'
        "[rank{r}]:     train()\n"
        '[rank{r}]:   File "/work/train.py", line 64, in train\n'
        "[rank{r}]:     loss.backward()\n"
        '[rank{r}]:   File "/opt/venv/lib/python3.11/site-packages/torch/_tensor.py", line 626, in backward\n'
        "[rank{r}]:     torch.autograd.backward(\n"
    )
    failed = (
        "[rank0]: Traceback (most recent call last):\n"
        + path.format(r=0)
        + '[rank0]: RuntimeError: expect_autograd_hooks_ INTERNAL ASSERT FAILED at "reducer.cpp":1633, please report '
        "a bug to PyTorch.\n"
    )
    cut = "[rank1]: Traceback (most recent call last):\n" + path.format(r=1)
    nobody = judged(failed + cut).nobody
    assert nobody is not None and "ranks 0-1 failed alike (RuntimeError: expect_autograd_hooks_ INTERNAL" in nobody


def test_a_failure_raised_as_the_processes_meet_is_the_set_up_not_a_rank() -> None:
    """A process's traceback ends in ``init_process_group`` with a connection reset, or two ranks' in the store it
    makes: the processes had not met, so none held another up. Not so beside another rank's own
    failure elsewhere, nor for a traceback that never passed the rendezvous."""
    c10d = "/opt/conda/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py"
    reset = (
        "Traceback (most recent call last):\n"
        '  File "/work/train.py", line 132, in main\n'
        "    dist.init_process_group(backend=args.backend)\n"
        f'  File "{c10d}", line 360, in init_process_group\n'
        "    timeout=timeout)\n"
        "RuntimeError: Connection reset by peer\n"
    )
    said = judged(reset).nobody
    assert said is not None and said.startswith("a process failed in init_process_group, as the processes met")
    assert "(RuntimeError: Connection reset by peer)" in said and "MASTER_ADDR" in said
    rendezvous = "/venv/lib/python3.11/site-packages/torch/distributed/rendezvous.py"
    both = "".join(
        f"[rank{rank}]: {line}\n"
        for rank in (1, 2)
        for line in (
            "Traceback (most recent call last):",
            '  File "/work/train.py", line 20, in <module>',
            "    dist.init_process_group('nccl')",
            f'  File "{c10d}", line 1520, in init_process_group',
            "    store, rank, world_size = next(rendezvous_iterator)",
            f'  File "{rendezvous}", line 269, in _env_rendezvous_handler',
            "    store = _create_c10d_store(master_addr, master_port, rank, world_size, timeout, use_libuv)",
            f'  File "{rendezvous}", line 189, in _create_c10d_store',
            "    return TCPStore(",
            "torch.distributed.DistNetworkError: Connection reset by peer",
        )
    )
    said = judged(both).nobody
    assert said is not None and said.startswith("ranks 1-2 failed in _create_c10d_store, as the processes met")
    crashed = "[rank0]: Traceback (most recent call last):\n[rank0]: ValueError: bad config\n"
    assert "as the processes met" not in str(judged(reset + crashed).nobody), "rank 0 failed apart: perhaps first"
    later = reset.replace("init_process_group", "all_reduce")
    assert "as the processes met" not in str(judged(later).nobody), "past the rendezvous: the ranks had met"


def test_a_paste_begun_inside_a_frames_line_and_a_redacted_host_still_say_who_failed_how() -> None:
    """The paste's first line is a frame whose start was cut, its host name redacted in srun's line: the
    exception under that frame is still read, with its place, and srun's tasks still ended."""
    paste = (
        '..../site-packages/lightning/strategies/ddp.py", line 118, in root_device\n'
        "    return self.parallel_devices[self.local_rank]\n"
        "IndexError: list index out of range\n"
        "srun: error: <node-name>: tasks 6-7: Exited with exit code 1\n"
    )
    log = analyzed(paste).log
    assert [(r.type, r.frames[-1].func) for r in log.exceptions] == [("IndexError", "root_device")]
    assert [(e.who, e.code, e.host) for e in log.exits] == [(6, 1, "<node-name>"), (7, 1, "<node-name>")]
    later = "train started\n" + paste
    assert analyzed(later).log.exceptions == [], "past the paste's start: a line of the program's, no frame"
    labelled = "".join(f"[rank3]:{line}\n" if at else f"{line}\n" for at, line in enumerate(paste.splitlines()[:3]))
    raised = analyzed(labelled).log.raised
    assert list(raised) == [3] and raised[3].frames[-1].func == "root_device", "its label, the line's below it"


def test_a_process_failing_on_its_own_gpu_as_the_processes_meet_is_not_the_set_ups() -> None:
    """A group made with its communicator at once takes the process's GPU inside ``init_process_group``: a fault of
    that GPU, or of its driver, fails there on that process alone, not as they meet: it stays suspected."""
    c10d = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
    for message in (
        "RuntimeError: CUDA error: unspecified launch failure",
        "RuntimeError: CUDA driver error: operation not permitted",
    ):
        text = "".join(
            f"[rank5]: {line}\n"
            for line in (
                "Traceback (most recent call last):",
                '  File "/work/train.py", line 12, in <module>',
                "    dist.init_process_group('nccl', device_id=torch.device('cuda', 5))",
                f'  File "{c10d}", line 1710, in init_process_group',
                "    default_pg, _ = _new_process_group_helper(",
                message,
            )
        )
        verdict = judged(text)
        assert verdict.nobody is None and suspects(verdict) == [5], message


def test_a_subgroup_smaller_than_the_ranks_it_may_hold_is_said_as_so_many_of_them() -> None:
    """torch 2.4: rank 0 times out in an all-gather of group 1 that gathers 4 elements into 8: two members, rank 0 and
    one the log does not name. Its members are 2 of ranks 0-3, not ranks 0-3; the ranks that may be its peer stay
    suspects."""
    waits = (
        "[rank0]:[E820 11:47:24.06 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=2, OpType=_ALLGATHER_BASE, NumelIn=4, NumelOut=8, Timeout(ms)=600000) ran for 600001 "
        "milliseconds before timing out.\n"
        "[rank0]:[E820 11:47:24.07 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 0] Exception (either an error or timeout) "
        "detected by watchdog at work: 2, last enqueued NCCL work: 3, last completed NCCL work: 1.\n"
        "[rank3]:[W820 11:37:20.00 init.py:1] world size 4\n"
    )
    analysis = analyzed(waits)
    assert "of group 1 (2 of ranks 0-3)" in render_analysis(analysis)
    assert [g.size for g in analysis.ranks[0].groups] == [2]
    assert sorted(suspects(assign_blame(analysis))) == [1, 2, 3]


def _watchdog_ended(group: str, local: int, error: str) -> str:
    return (
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        f"  what():  [PG ID 2 PG GUID {group} Rank {local}] Process group watchdog thread terminated with exception: "
        f"{error}\n"
    )


def test_a_group_rank_whose_own_gpu_ended_its_watchdog_is_suspected_by_its_number_where_no_global_rank_is_named() -> (
    None
):
    """A serving engine's processes print no ``[rankN]:``: the watchdog of rank 1 of group 3 ended on its own GPU's
    CUDA error. Its global rank is not in the log; where the group holds the job's ranks in order (one tensor-parallel
    group) it is rank 1: suspected, with that said. Not on NCCL's error under it (a lost peer's), nor where two of the
    group's ranks failed so, nor where a line names a global rank."""
    own = _watchdog_ended("3", 1, "CUDA error: an illegal memory access was encountered")
    verdict = judged(own)
    assert verdict.culprits == [] and suspects(verdict) == [1]
    assert "rank 1 of group 3" in verdict.suspects[0].why and "in order" in verdict.suspects[0].why
    assert suspects(judged(_watchdog_ended("3", 1, "NCCL error: remote process exited or there was a network error")))[
        :1
    ] != [1]
    assert suspects(judged(own + _watchdog_ended("3", 2, "CUDA error: an illegal memory access was encountered"))) == []
    assert 1 not in suspects(judged("[rank6]:[W1124 03:12:40.2 init.py:1] step 10\n" + own))
