"""Stacks pasted with a hung job's log (:mod:`distmon.forensics.pasted_stacks`): py-spy's dump of
each rank and faulthandler's, read as where each rank stood; the few that stood elsewhere than
the others, which wait in a collective, are suspected, never proven. The dumps here are written
as py-spy and faulthandler write them, for these tests alone; a real job's are in
``tests/data/logs/pasted-stacks/`` (how: ``pasted-stacks.md`` beside it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from distmon.forensics import pasted_stacks
from distmon.forensics.analysis import analyze
from distmon.forensics.blame import assign_blame
from distmon.forensics.logs import read_log
from distmon.forensics.render import analysis_json, render_analysis

REAL = Path(__file__).parents[1] / "data" / "logs" / "pasted-stacks"

C10D = "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


def faulthandler(rank: int, frames: list[tuple[str, int, str]], current: bool = True) -> str:
    """A rank's faulthandler dump of its main thread and one other, as torchrun labels its lines."""
    head = "Current thread" if current else "Thread"
    lines = ["Thread 0x00007f11aa7fe640 (most recent call first):"]
    lines += ['  File "/usr/lib/python3.11/threading.py", line 331 in wait', ""]
    lines += [f"{head} 0x00007f11c2d1b740 (most recent call first):"]
    lines += [f'  File "{file}", line {line} in {func}' for file, line, func in frames]
    return "".join(f"[rank{rank}]:{line}\n" for line in lines)


IN_ALL_REDUCE = [(C10D, 2806, "all_reduce"), ("/home/me/train.py", 41, "step"), ("/home/me/train.py", 60, "<module>")]
IN_LOADING = [
    ("/home/me/data.py", 17, "load_batch"),
    ("/home/me/train.py", 39, "step"),
    ("/home/me/train.py", 60, "<module>"),
]


def py_spy(pid: int, frames: list[tuple[str, str, int]], command: str = "/usr/bin/python3 -u train.py") -> str:
    """``py-spy dump --pid PID``: paths shortened to their sys.path entry, innermost first."""
    lines = [f"Process {pid}: {command}", "Python v3.11.7 (/usr/bin/python3.11)", ""]
    lines += [f'Thread {pid} (idle): "MainThread"']
    lines += [f"    {func} ({file}:{line})" for func, file, line in frames]
    lines += [f'Thread {pid + 40} (idle): "Thread-1 (_serve)"', "    wait (threading.py:331)", ""]
    return "\n".join(lines) + "\n"


SPY_ALL_REDUCE = [
    ("all_reduce", "torch/distributed/distributed_c10d.py", 2806),
    ("wrapper", "torch/distributed/c10d_logger.py", 83),
    ("step", "train.py", 41),
    ("<module>", "train.py", 60),
]
SPY_LOADING = [
    ("get", "queue.py", 180),
    ("load_batch", "data.py", 17),
    ("step", "train.py", 39),
    ("<module>", "train.py", 60),
]


def test_the_rank_whose_faulthandler_stack_stands_apart_from_the_waiters_is_suspected(tmp_path: Path) -> None:
    log = "".join(faulthandler(r, IN_LOADING if r == 2 else IN_ALL_REDUCE) for r in range(4))
    (tmp_path / "job.log").write_text(log)
    analysis = analyze([str(tmp_path)])
    verdict = assign_blame(analysis)
    assert verdict.culprits == [] and [s.rank for s in verdict.suspects] == [2], verdict
    assert verdict.suspects[0].why == (
        "its stack, which faulthandler took, stood in its own code (your code: /home/me/data.py:17 in load_batch), "
        "where ranks 0-1, 3 stood in a collective (all_reduce)"
    )
    text = render_analysis(analysis)
    assert (
        "ranks 0-1, 3: no evidence (no watchdog line in the log, only a stack faulthandler took): stood in a " in text
    )
    assert "(your code: /home/me/train.py:41 in step)" in text, text


def test_py_spy_dumps_in_files_named_for_their_ranks_are_those_ranks_stacks(tmp_path: Path) -> None:
    """``py-spy dump --pid PID > pyspy_rank3.txt`` for each rank: the file's name places the dump.
    py-spy's shortened paths of the standard library (``queue.py``) are not the user's code."""
    for rank in range(3):
        text = py_spy(4000 + rank, SPY_LOADING if rank == 1 else SPY_ALL_REDUCE)
        (tmp_path / f"pyspy_rank{rank}.txt").write_text(text)
    verdict = assign_blame(analyze([str(tmp_path)]))
    assert [s.rank for s in verdict.suspects] == [1], verdict
    assert "py-spy took, stood waiting on a lock, a queue or a thread (your code: data.py:17 in load_batch)" in (
        verdict.suspects[0].why
    )


WATCHDOG = (
    "[rank{}]:[E1124 03:12:44.123456789 ProcessGroupNCCL.cpp:632] [Rank {}] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=51, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600060 "
    "milliseconds before timing out.\n"
)


def test_beside_watchdog_lines_the_one_stack_pasted_says_where_the_silent_rank_stood(tmp_path: Path) -> None:
    """Ranks 0 and 2 timed out in all_reduce; rank 1 printed no watchdog line, and its stack was
    taken: it is suspected for where it stood, beside the ranks whose lines prove they waited."""
    log = WATCHDOG.format(0, 0) + WATCHDOG.format(2, 2) + faulthandler(1, IN_LOADING)
    (tmp_path / "job.log").write_text(log)
    verdict = assign_blame(analyze([str(tmp_path)]))
    assert verdict.culprits == [] and [s.rank for s in verdict.suspects] == [1], verdict
    assert verdict.suspects[0].why == (
        "its stack, which faulthandler took, stood in its own code (your code: /home/me/data.py:17 in load_batch), "
        "where ranks 0, 2 wait in a collective (their watchdog lines)"
    )


SPY_NEXT_BATCH = [
    ("_next_data", "torch/utils/data/dataloader.py", 1448),
    ("__next__", "torch/utils/data/dataloader.py", 708),
    ("step", "train.py", 38),
    ("<module>", "train.py", 60),
]
SPY_WORKER_READING = [
    ("__getitem__", "dataset.py", 31),
    ("_worker_loop", "torch/utils/data/_utils/worker.py", 349),
    ("_bootstrap", "multiprocessing/process.py", 314),
]
SPY_WORKER_IDLE = [
    ("poll", "multiprocessing/connection.py", 257),
    ("get", "multiprocessing/queues.py", 113),
    ("_worker_loop", "torch/utils/data/_utils/worker.py", 309),
]


def test_py_spys_subprocesses_are_the_ranks_children_not_the_rank(tmp_path: Path) -> None:
    """``py-spy dump --subprocesses`` of rank 1: its own process first, then its DataLoader workers.
    The rank stood waiting for a batch; the worker reading is said with it, the idle one not."""
    for rank in (0, 2):
        (tmp_path / f"pyspy_rank{rank}.txt").write_text(py_spy(4000 + rank, SPY_ALL_REDUCE))
    children = py_spy(4101, SPY_WORKER_READING) + py_spy(4102, SPY_WORKER_IDLE)
    (tmp_path / "pyspy_rank1.txt").write_text(py_spy(4001, SPY_NEXT_BATCH) + children)
    analysis = analyze([str(tmp_path)])
    assert analysis.log.stacks.ranked[1].pid == 4001
    verdict = assign_blame(analysis)
    assert [s.rank for s in verdict.suspects] == [1], verdict
    assert verdict.suspects[0].why == (
        "its stack, which py-spy took, stood waiting for a DataLoader batch (your code: train.py:38 in step); its "
        "child pid 4101 stood in its own code (your code: dataset.py:31 in __getitem__), where ranks 0, 2 stood in a "
        "collective (all_reduce)"
    )


def test_on_a_gpu_the_waiters_stand_at_a_cuda_sync(tmp_path: Path) -> None:
    """A collective returns at once on a GPU: the ranks that wait block later, synchronizing."""
    sync = [("/opt/venv/lib/python3.11/site-packages/torch/cuda/__init__.py", 985, "synchronize"), *IN_ALL_REDUCE[1:]]
    log = "".join(faulthandler(r, IN_LOADING if r == 0 else sync) for r in range(3))
    (tmp_path / "job.log").write_text(log)
    verdict = assign_blame(analyze([str(tmp_path)]))
    assert [s.rank for s in verdict.suspects] == [0] and "stood in a CUDA synchronize" in verdict.suspects[0].why


def test_more_ranks_apart_than_waiting_suspect_none_of_them(tmp_path: Path) -> None:
    log = "".join(faulthandler(r, IN_ALL_REDUCE if r == 0 else IN_LOADING) for r in range(3))
    (tmp_path / "job.log").write_text(log)
    assert assign_blame(analyze([str(tmp_path)])).suspects == []


def test_a_crash_dump_is_where_the_process_crashed_not_where_it_stood() -> None:
    lines = [
        "Fatal Python error: Segmentation fault",
        "",
        "Current thread 0x00007f11c2d1b740 (most recent call first):",
    ]
    lines += ['  File "/home/me/data.py", line 17 in load_batch', '  File "/home/me/train.py", line 60 in <module>']
    log = read_log(f"[rank1]:{line}\n" for line in lines)
    assert log.stacks.ranked == {}


def test_unlabelled_dumps_are_said_by_their_pids_and_blame_no_rank(tmp_path: Path) -> None:
    """A py-spy dump names a process, not a rank (torchrun's workers' commands name none;
    torch.distributed.launch's ``--local_rank`` is a rank on its node)."""
    text = py_spy(4242, SPY_ALL_REDUCE) + py_spy(4243, SPY_LOADING, "python train.py --local_rank=1")
    (tmp_path / "stacks.txt").write_text(text)
    verdict = assign_blame(analyze([str(tmp_path)]))
    assert verdict.suspects == [] and verdict.culprits == []
    assert verdict.headline == (
        "stacks the log places on no rank: pid 4243 (--local_rank 1) stood waiting on a lock, a queue or a thread "
        "(your code: data.py:17 in load_batch), where the other stood in a collective (all_reduce)"
    )
    (tmp_path / "stacks.txt").write_text(py_spy(4242, SPY_ALL_REDUCE) + py_spy(4243, SPY_ALL_REDUCE))
    assert assign_blame(analyze([str(tmp_path)])).headline == (
        "stacks the log places on no rank: pid 4242 stood in a collective (all_reduce) (your code: train.py:41 in "
        "step); pid 4243 stood in a collective (all_reduce) (your code: train.py:41 in step)"
    )


def test_a_line_naming_a_rank_above_its_dump_places_it(tmp_path: Path) -> None:
    """A paste of py-spy's dumps, each under a line a person wrote (``Rank 2:``, ``=== rank 0 ===``);
    a rank named above another line, not a dump, places nothing."""
    dumps = [py_spy(4000 + r, SPY_LOADING if r == 2 else SPY_ALL_REDUCE) for r in range(3)]
    text = f"=== rank 0 ===\n{dumps[0]}\nRank 1:\n\n{dumps[1]}Rank 2:\n{dumps[2]}rank 3\nthe job was killed\n"
    log = read_log(text.splitlines(keepends=True))
    assert sorted(log.stacks.ranked) == [0, 1, 2] and log.stacks.unplaced == []
    assert [p.pid for _, p in sorted(log.stacks.ranked.items())] == [4000, 4001, 4002]
    (tmp_path / "hang.txt").write_text(text)
    assert [s.rank for s in assign_blame(analyze([str(tmp_path)])).suspects] == [2]


def failure(rank: int) -> str:
    """An entry of torchrun's failure table: the rank with its pid."""
    return (
        f"[{rank}]:\n  time      : 2024-11-24_03:22:44\n  host      : node-1\n"
        f"  rank      : {rank} (local_rank: {rank})\n  exitcode  : -6 (pid: {4000 + rank})\n  error_file: <N/A>\n"
        f"  traceback : Signal 6 (SIGABRT) received by PID {4000 + rank}\n"
    )


def test_a_dump_of_a_process_torchruns_table_names_by_its_pid_is_that_ranks(tmp_path: Path) -> None:
    """py-spy's dumps taken as the job hung, unlabelled; then the watchdogs aborted the ranks and
    torchrun's table gave each rank's pid: the dumps are placed by it."""
    dumps = "".join(py_spy(4000 + r, SPY_LOADING if r == 1 else SPY_ALL_REDUCE) for r in range(3))
    table = "train.py FAILED\nFailures:\n" + failure(1) + failure(2) + "Root Cause (first observed failure):\n"
    (tmp_path / "job.log").write_text(dumps + table + failure(0))
    analysis = analyze([str(tmp_path)])
    assert sorted(analysis.log.stacks.ranked) == [0, 1, 2] and analysis.log.stacks.unplaced == []
    assert [s.rank for s in assign_blame(analysis).suspects][:1] == [1]


def test_the_frames_kept_of_one_log_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """However many dumps a log holds, the frames read into them are bounded: past the bound, a dump
    keeps none, and is no stack."""
    monkeypatch.setattr(pasted_stacks, "MAX_KEPT", 8)
    text = "".join(faulthandler(r, IN_ALL_REDUCE) for r in range(8))  # 4 frames a dump, the other thread's 1
    log = read_log(text.splitlines(keepends=True))
    assert sorted(log.stacks.ranked) == [0, 1]


def test_py_spys_locals_stay_inside_their_frame() -> None:
    text = py_spy(7, SPY_ALL_REDUCE).replace(
        "    wrapper (torch/distributed/c10d_logger.py:83)\n",
        "    wrapper (torch/distributed/c10d_logger.py:83)\n        Arguments:\n            args: (<Tensor>,)\n",
    )
    log = read_log(f"[rank0]:{line}" for line in text.splitlines(keepends=True))
    assert [f.func for f in log.stacks.ranked[0].frames] == ["<module>", "step", "wrapper", "all_reduce"]


def test_a_real_jobs_stacks_name_the_rank_that_stopped_in_its_data_loading(tmp_path: Path) -> None:
    """A real 3-rank gloo job (``tests/data/logs/pasted-stacks.md``): rank 1 asleep in its data
    loading at step 5, ranks 0 and 2 in all_reduce; py-spy's dumps of each rank, and faulthandler's
    in torchrun's output labelled by ``--tee``, each suspect rank 1, though torchrun was then stopped
    by SIGTERM (the stacks were taken of a hang). Unlabelled, the dumps name the process apart."""
    for name in ("pyspy_rank0.txt", "pyspy_rank1.txt", "pyspy_rank2.txt"):
        shutil.copy(REAL / name, tmp_path / name)
    for paths in ([str(tmp_path)], [str(REAL / "torchrun-tee.log")]):
        verdict = assign_blame(analyze(paths))
        assert [s.rank for s in verdict.suspects] == [1], (paths, verdict)
        assert (
            "train.py:14 in load_batch), where ranks 0, 2 stood in a collective (all_reduce)" in verdict.suspects[0].why
        )
    stacks = analysis_json(analyze([str(tmp_path)]))["stacks"]
    assert [(s["rank"], s["pid"], s["how"], s["stood"]) for s in stacks] == [
        (0, 24791, "py-spy", "in a collective (all_reduce)"),
        (1, 24792, "py-spy", "in its own code"),
        (2, 24793, "py-spy", "in a collective (all_reduce)"),
    ]
    assert stacks[1]["your_code"] == "train.py:14 in load_batch"
    assert stacks[1]["frames"][-1] == {"file": "train.py", "line": 14, "func": "load_batch"}
    verdict = assign_blame(analyze([str(REAL / "torchrun.log")]))
    assert verdict.suspects == [] and verdict.nobody is None, verdict
    assert verdict.headline == (
        "stacks the log places on no rank: a process stood in its own code (your code: /tmp/stackjob/train.py:14 in "
        "load_batch), where 2 others stood in a collective (all_reduce)"
    )
