"""``distmon doctor`` on this machine (no GPU), on wrong rendezvous settings and launch
commands, and its collectives smoke test on real gloo ranks under torchrun. Its checks from
given facts: tests/unit/test_doctor.py.

Each doctor run is an interpreter of its own that imports torch, on one core: a test that
makes several makes them side by side. The smoke test with a stopped rank spends 20 s in its
ranks' timeouts: it starts with the module and the other tests run meanwhile.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TypeVar

import psutil
import pytest

from tests.support.commands import TORCHRUN, distmon, free_port
from tests.support.processes import kill_tree, start

T = TypeVar("T")


def doctor(*args: str, **env: str) -> tuple[int, dict[str, dict]]:
    """Exit code and the checks by name, from ``distmon doctor --json``."""
    environment = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK")}
    environment.update({"MASTER_PORT": str(free_port()), **env})
    done = distmon("doctor", "--json", *args, env=environment, timeout=120)
    document = json.loads(done.stdout)
    assert document["ok"] == (done.returncode == 0)
    return done.returncode, {c["name"]: c for c in document["checks"]}


def side_by_side(*runs: Callable[[], T]) -> list[T]:
    """The results of ``runs``, run two at a time."""
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda run: run(), runs))


@pytest.fixture(scope="module")
def plain_doctor() -> tuple[int, dict[str, dict]]:
    """``distmon doctor --json`` as it runs here, for the tests that read it."""
    return doctor()


def test_this_machine_has_no_gpu_and_the_rest_is_checked(plain_doctor: tuple[int, dict[str, dict]]) -> None:
    code, checks = plain_doctor
    assert code == 0
    assert checks["torch"]["status"] == "pass" and "torch 2." in checks["torch"]["detail"]
    assert checks["cuda"]["status"] == "warn"
    assert (
        checks["cuda"]["detail"].startswith("no GPU: CUDA and NCCL unavailable")
        and "use gloo" in checks["cuda"]["detail"]
    )
    assert {"master_addr", "master_port", "shm", "open_files", "processes", "cpus"} <= set(checks)
    assert all(c["fix"] for c in checks.values() if c["status"] != "pass")


def test_the_flight_recorder_is_proven_on_and_told_off_when_its_buffer_is_zero(
    plain_doctor: tuple[int, dict[str, dict]],
) -> None:
    """distmon reads sequence numbers from it: without it hangs are judged by stacks alone."""
    _, checks = plain_doctor
    assert checks["flight_recorder"]["status"] == "pass", checks["flight_recorder"]
    _, checks = doctor(TORCH_FR_BUFFER_SIZE="0")
    off = checks["flight_recorder"]
    assert off["status"] == "warn" and "off (TORCH_FR_BUFFER_SIZE=0)" in off["detail"]
    assert "TORCH_FR_BUFFER_SIZE=2000" in off["fix"]


def test_the_table_has_a_line_per_check_and_a_verdict() -> None:
    done = distmon("doctor", env={**os.environ, "MASTER_PORT": str(free_port())}, timeout=120)
    lines = done.stdout.splitlines()
    assert any(line.startswith("WARN  cuda ") for line in lines)
    assert any(line.strip().startswith("fix: ") for line in lines)
    assert lines[-1].startswith("ready, with warnings: ")


def test_a_wrong_master_addr_fails() -> None:
    code, checks = doctor(MASTER_ADDR="no-such-host.invalid")
    assert code == 1
    assert checks["master_addr"]["status"] == "fail"
    assert "no-such-host.invalid does not resolve" in checks["master_addr"]["detail"]


def test_a_closed_port_on_the_master_is_reported_from_another_node() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port, closed = server.getsockname()[1], free_port()
        (code, checks), (_, listening) = side_by_side(
            lambda: doctor(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(closed), NODE_RANK="1"),
            lambda: doctor(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NODE_RANK="1"),
        )
    assert code == 0
    assert checks["master_port"]["status"] == "warn"
    assert f"nothing listens on port {closed}" in checks["master_port"]["detail"]
    assert listening["master_port"]["status"] == "pass"


def test_a_busy_port_on_the_master_fails_and_names_who_holds_it() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code, checks = doctor(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    assert code == 1
    assert checks["master_port"]["status"] == "fail"
    assert f"port {port} on this node is already in use by pid {os.getpid()}" in checks["master_port"]["detail"]


def test_loopback_for_a_multi_node_job_fails(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    launch = [TORCHRUN, "--nnodes=2", "--node-rank=0", "--master-addr=localhost", "train.py"]
    code, checks = _doctor_in(tmp_path, *launch)
    assert code == 1
    assert "is loopback" in checks["master_addr"]["detail"] and "2 nodes" in checks["master_addr"]["detail"]


def _doctor_in(cwd: Path, *launch: str) -> tuple[int, dict[str, dict]]:
    done = distmon("doctor", "--json", "--", *launch, cwd=cwd, timeout=120)
    return done.returncode, {c["name"]: c for c in json.loads(done.stdout)["checks"]}


def test_torchrun_python_train_py_is_the_launch_mistake(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    (code, checks), (_, right), (_, missing) = side_by_side(
        lambda: _doctor_in(
            tmp_path, "torchrun", "--standalone", "--nproc_per_node=4", "python", "train.py", "--lr", "1"
        ),
        lambda: _doctor_in(tmp_path, "torchrun", "--standalone", "--nproc_per_node", "4", "train.py"),
        lambda: _doctor_in(tmp_path, "torchrun", "--standalone", "missing.py"),
    )
    assert code == 1
    launch = checks["launch"]
    assert launch["status"] == "fail" and "named 'python'" in launch["detail"]
    assert launch["fix"] == "drop 'python': torchrun --standalone --nproc_per_node=4 train.py --lr 1"
    assert checks["rendezvous"]["status"] == "pass"
    assert right["launch"]["status"] == "pass"
    assert missing["launch"]["status"] == "fail" and "missing.py does not exist" in missing["launch"]["detail"]


def test_without_torch_the_doctor_says_so_and_checks_the_rest() -> None:
    """As on a machine that only runs the monitor: ``import torch`` fails in this process."""
    code = "import sys; sys.modules['torch'] = None; from distmon.cli import main; sys.exit(main(['doctor', '--json']))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "MASTER_PORT": str(free_port())},
        capture_output=True,
        text=True,
        timeout=60,
    )
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert done.returncode == 0, done.stderr
    assert checks["torch"]["status"] == "warn" and "torch is not installed" in checks["torch"]["detail"]
    assert checks["shm"]["status"] == "pass" and checks["master_port"]["status"] == "pass"


def test_importing_the_doctor_command_does_not_import_torch() -> None:
    code = "import sys, distmon.commands.doctor; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout == "False\n"


def test_collectives_outside_torchrun_is_a_usage_error() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    done = subprocess.run(
        [sys.executable, "-m", "distmon.doctor", "--collectives"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1


def smoke_test(*args: str, nproc: int = 4) -> subprocess.Popen[str]:
    command = [TORCHRUN, "--standalone", f"--nproc_per_node={nproc}", "-m", "distmon.doctor", "--collectives", "--json"]
    return start(
        [*command, *args],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module", autouse=True)
def stopped_rank(request: pytest.FixtureRequest) -> Iterator[Future[str] | None]:
    """Rank 0's verdict from the smoke test whose rank 2 is stopped, started with the module
    when that test is to run."""
    if not any(item.name == "test_collectives_name_a_stopped_rank" for item in request.session.items):
        yield None
        return
    with ThreadPoolExecutor(1) as pool:
        yield pool.submit(smoke_test_with_rank_2_stopped)


def smoke_test_with_rank_2_stopped() -> str:
    """Rank 2 is stopped (SIGSTOP) before it joins: the others time out, rank 0 says who."""
    job = smoke_test("--timeout", "10")
    try:
        rank2 = _wait_for_rank(job.pid, "2", timeout=60)
        rank2.suspend()
        return _read_rank0_then_kill(job, rank2)
    finally:
        kill_tree(job)


def test_collectives_on_four_gloo_ranks(stopped_rank: Future[str] | None) -> None:
    if stopped_rank is not None:
        wait([stopped_rank])  # alone on the machine: it checks that no rank is slower than the others
    job = smoke_test("--rounds", "3")
    try:
        out, err = job.communicate(timeout=180)
    finally:
        kill_tree(job)
    assert job.returncode == 0, err[-3000:]
    document = json.loads(out)
    checks = {c["name"]: c for c in document["checks"]}
    assert set(checks) == {"ranks", "init", "barrier", "all_reduce", "broadcast", "versions"}
    for name, check in checks.items():
        # A rank the machine's load held back is a true warning: the timing rule is tests/unit/test_doctor.py's.
        slowed = name in ("barrier", "all_reduce", "broadcast") and check["detail"].startswith(f"{name} slow on rank")
        assert check["status"] == "pass" or (check["status"] == "warn" and slowed), check
    assert [row["rank"] for row in document["ranks"]] == [0, 1, 2, 3]
    assert all(row["result"] == "ok" and row["all_reduce"] > 0 for row in document["ranks"])


def test_collectives_name_a_stopped_rank(stopped_rank: Future[str] | None) -> None:
    assert stopped_rank is not None
    document = json.loads(stopped_rank.result(timeout=180))
    checks = {c["name"]: c for c in document["checks"]}
    assert not document["ok"]
    assert checks["ranks"]["status"] == "fail" and checks["ranks"]["detail"].startswith("rank 2 gave no result")
    assert checks["init"]["status"] == "fail" and "ranks 0-1, 3" in checks["init"]["detail"]
    assert [row["result"] for row in document["ranks"]] == ["init failed", "init failed", "no result", "init failed"]


def _wait_for_rank(launcher: int, local_rank: str, timeout: float) -> psutil.Process:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in psutil.Process(launcher).children(recursive=True):
            try:
                if child.environ().get("LOCAL_RANK") == local_rank:
                    return child
            except psutil.Error:
                continue
        time.sleep(0.02)
    raise AssertionError(f"no rank with LOCAL_RANK={local_rank} appeared")


def _read_rank0_then_kill(job: subprocess.Popen[str], stopped: psutil.Process) -> str:
    """torchrun waits for the stopped rank forever: once rank 0 has answered, kill that rank."""
    rank0 = _wait_for_rank(job.pid, "0", timeout=10)
    rank0.wait(120)
    stopped.kill()
    return job.communicate(timeout=60)[0]


def test_the_doctor_says_a_gloo_machine_leaves_no_dumps(plain_doctor: tuple[int, dict[str, dict]]) -> None:
    _, checks = plain_doctor
    dumps = checks["fr_dumps"]
    assert dumps["status"] == "warn" and "no NCCL here" in dumps["detail"] and "distmon analyze" in dumps["detail"]
