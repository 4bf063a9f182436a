"""``distmon run`` with real processes: unmodified scripts under torchrun, mp.spawn and plain
python get the hook in their ranks and nowhere else; signals, exit codes, a chained
sitecustomize, the recorder and the terminal UI alongside."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from distmon.launch import PYTHONPATH_DIR
from tests.support.commands import DISTMON, TORCHRUN, distmon, free_port
from tests.support.listener import Listener
from tests.support.paths import TRAIN
from tests.support.processes import kill_tree, recorded_run, start
from tests.support.waiting import wait_until

JOB_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "DISTMON_INTERVAL": "0.5"}

DDP_SCRIPT = """
    import datetime, os, subprocess, sys, time
    import torch, torch.distributed as dist
    from torch.utils.data import DataLoader, TensorDataset

    def main():
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        dataset = TensorDataset(torch.randn(64, 4))
        data = DataLoader(dataset, batch_size=8, num_workers=1, multiprocessing_context="spawn")
        subprocess.run([sys.executable, "-c", "import torch"], check=True)  # a helper: inherits RANK
        for (x,) in data:
            model(x).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
        print(f"rank {dist.get_rank()} pid {os.getpid()}", flush=True)
        dist.barrier()
        dist.destroy_process_group()

    if __name__ == "__main__":
        main()
"""

SPAWN_SCRIPT = """
    import datetime, os, time
    import torch, torch.distributed as dist, torch.multiprocessing as mp

    def rank_main(rank):
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                                timeout=datetime.timedelta(seconds=60))
        model = torch.nn.Linear(4, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(5):
            model(torch.randn(8, 4)).sum().backward()
            optimizer.step()
        print(f"rank {{rank}} pid {{os.getpid()}}", flush=True)
        dist.destroy_process_group()

    if __name__ == "__main__":
        print(f"parent pid {{os.getpid()}}", flush=True)
        mp.spawn(rank_main, nprocs=2)
"""

SINGLE_SCRIPT = """
    import os, time
    import torch

    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(7):
        model(torch.randn(8, 4)).sum().backward()
        optimizer.step()
    print(f"rank 0 pid {os.getpid()}", flush=True)
"""


def distmon_run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``distmon run ARGS`` to its end, in the jobs' environment unless ``env`` says otherwise."""
    return distmon("run", *args, env=env or JOB_ENV, timeout=180)


def script(tmp_path: Path, source: str, name: str = "train.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def rank_pids(output: str) -> dict[int, int]:
    return {int(rank): int(pid) for rank, pid in re.findall(r"rank (\d+) pid (\d+)", output)}


def reporting(listener: Listener) -> dict[int, tuple[set[int], int]]:
    """Per rank: the pids that reported as it, and the most steps reported (the exit report
    counts them all; an mp.spawn rank, with no ``RANK`` variable, keeps its rank after
    ``destroy_process_group``)."""
    seen: dict[int, tuple[set[int], int]] = {}
    for report in listener.snapshot():
        pids, steps = seen.get(report.rank, (set(), 0))
        seen[report.rank] = (pids | {report.pid}, max(steps, report.steps))
    return seen


def reported(listener: Listener, expected: dict[int, tuple[set[int], int]]) -> None:
    """The ranks' reports, once the last is in (they are sent as the ranks exit)."""
    with contextlib.suppress(AssertionError):
        wait_until(lambda: reporting(listener) == expected, 30, "the exit reports")
    assert reporting(listener) == expected


def test_unmodified_torchrun_job_reports_from_its_ranks_only(tmp_path: Path, listener: Listener) -> None:
    """Not torchrun's agent, not the spawned DataLoader workers, not a helper subprocess."""
    train = script(tmp_path, DDP_SCRIPT)
    done = distmon_run("--endpoint", listener.endpoint, "--", TORCHRUN, "--standalone", "--nproc_per_node=2", train)
    assert done.returncode == 0, done.stderr[-3000:]
    pids = rank_pids(done.stdout)
    assert set(pids) == {0, 1}
    reported(listener, {0: ({pids[0]}, 8), 1: ({pids[1]}, 8)})


def test_ranks_started_by_mp_spawn_report_and_their_parent_does_not(tmp_path: Path, listener: Listener) -> None:
    train = script(tmp_path, SPAWN_SCRIPT.format(port=free_port()))
    done = distmon_run("--endpoint", listener.endpoint, "--", sys.executable, train)
    assert done.returncode == 0, done.stderr[-3000:]
    pids = rank_pids(done.stdout)
    reported(listener, {0: ({pids[0]}, 5), 1: ({pids[1]}, 5)})
    assert {report.pid for report in listener.snapshot()} == set(pids.values())


def test_a_single_process_script_reports_as_rank_0(tmp_path: Path, listener: Listener) -> None:
    train = script(tmp_path, SINGLE_SCRIPT)
    done = distmon_run("--endpoint", listener.endpoint, "--", sys.executable, train)
    assert done.returncode == 0, done.stderr[-3000:]
    reported(listener, {0: ({rank_pids(done.stdout)[0]}, 7)})


def test_a_sitecustomize_already_on_the_path_still_runs(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['CHAINED'] = 'yes'\n")
    env = {**JOB_ENV, "PYTHONPATH": str(site)}
    show = "import os, sys; print(os.environ['CHAINED'], *sys.path[1:3])"  # sys.path[0] is '' for -c
    done = distmon_run("--", sys.executable, "-c", show, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["yes", str(PYTHONPATH_DIR), str(site)]


def test_the_flight_recorder_is_on_unless_the_job_says_otherwise() -> None:
    show = "import os; print(os.environ.get('TORCH_FR_BUFFER_SIZE'), os.environ.get('TORCH_NCCL_TRACE_BUFFER_SIZE'))"
    unset = {k: v for k, v in JOB_ENV.items() if not k.endswith("BUFFER_SIZE")}
    assert distmon_run("--", sys.executable, "-c", show, env=unset).stdout.split() == ["2000", "None"]
    older = {**unset, "TORCH_NCCL_TRACE_BUFFER_SIZE": "0"}
    assert distmon_run("--", sys.executable, "-c", show, env=older).stdout.split() == ["None", "0"]


def test_nccl_times_its_collectives_unless_the_job_says_otherwise() -> None:
    """A rank's pace on NCCL counts the time its GPU waits in a collective, which NCCL tells
    only where it times them."""
    show = "import os; print(os.environ.get('TORCH_NCCL_ENABLE_TIMING'))"
    unset = {k: v for k, v in JOB_ENV.items() if k != "TORCH_NCCL_ENABLE_TIMING"}
    assert distmon_run("--", sys.executable, "-c", show, env=unset).stdout.split() == ["1"]
    told = {**unset, "TORCH_NCCL_ENABLE_TIMING": "0"}
    assert distmon_run("--", sys.executable, "-c", show, env=told).stdout.split() == ["0"]


@pytest.mark.parametrize(
    ("code", "status"),
    [("import sys; sys.exit(3)", 3), ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 128 + 9)],
    ids=["exit-3", "sigkill"],
)
def test_the_job_exit_status_is_passed_through(code: str, status: int) -> None:
    assert distmon_run("--", sys.executable, "-c", code).returncode == status


def test_a_missing_command_or_program_is_one_line() -> None:
    usage = distmon_run()
    assert usage.returncode == 2 and len(usage.stderr.splitlines()) == 1, usage.stderr
    missing = distmon_run("--", "no-such-program-distmon")
    assert missing.returncode == 127
    assert missing.stderr.strip().splitlines() == [
        "distmon run: cannot run no-such-program-distmon: No such file or directory"
    ]


WAITS_FOR_SIGNALS = """
    import signal, sys, time
    signal.signal(signal.SIGTERM, lambda *_: (print("job got SIGTERM", flush=True), sys.exit(7)))
    print("ready", flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 7), (signal.SIGINT, 130)], ids=["term", "int"])
def test_signals_sent_to_distmon_reach_the_job(tmp_path: Path, signum: int, status: int) -> None:
    job = script(tmp_path, WAITS_FOR_SIGNALS, "job.py")
    process = subprocess.Popen(
        [*DISTMON, "run", "--", sys.executable, job],
        env=JOB_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout.readline() == "ready\n"
        process.send_signal(signum)
        assert process.wait(30) == status
    finally:
        process.kill()
        process.wait()


def test_a_hang_in_an_unmodified_job_is_caught_and_the_recording_closes(tmp_path: Path) -> None:
    """examples/train.py without --distmon; Ctrl-C (SIGINT to distmon) after the alert."""
    out = tmp_path / "run.distmon"
    job = [TORCHRUN, "--standalone", "--nproc_per_node=3", str(TRAIN)]
    job += ["--fault", "hang", "--fault-rank", "2", "--timeout", "120", "--workers", "0"]
    process, lines, reader = recorded_run(out, job, {**JOB_ENV, "DISTMON_INTERVAL": "1"})
    try:
        deadline = time.monotonic() + 150
        while not any(" hang: " in line for line in lines) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert any(" hang: " in line for line in lines), "".join(lines)[-3000:]
        process.send_signal(signal.SIGINT)
        status = process.wait(60)
    finally:
        kill_tree(process)
    reader.join(5)
    assert status != 0
    assert any(line.startswith("distmon record:") and f"wrote {out}" in line for line in lines), "".join(lines)
    report = distmon("report", out, "--json")
    assert report.returncode == 0, report.stderr
    hangs = [a for a in json.loads(report.stdout) if a["kind"] == "hang"]
    assert hangs and hangs[0]["ranks"] == [2], report.stdout


def test_watch_shows_the_ui_and_sends_the_job_output_to_the_log(tmp_path: Path) -> None:
    """The terminal UI runs on a real pseudo-terminal; the job's output goes to the log; q quits."""
    log = tmp_path / "job.log"
    command = [*DISTMON, "run", "--watch", "--log", str(log), "--"]
    command += [sys.executable, "-c", "print('hello from the job')"]
    controller, terminal = pty.openpty()
    process = start(
        command,
        env={**JOB_ENV, "TERM": "xterm-256color"},
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
    )
    os.close(terminal)
    screen = b""
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not ("hello from the job" in _read(log) and b"Listening" in screen):
            screen += _drain(controller)  # until the job has run and the UI is up and drawing
        os.write(controller, b"q")
        status = process.wait(30)
        screen += _drain(controller)
    finally:
        kill_tree(process)
        os.close(controller)
    assert _read(log) == "hello from the job\n"
    assert status == 0
    assert b"hello from the job" not in screen
    assert f"the job exited with status 0; its output is in {log}".encode() in screen.replace(b"\r\n", b"\n")


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def _drain(fd: int) -> bytes:
    data = b""
    while select.select([fd], [], [], 0.1)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data
