"""``distmon doctor``'s checks from given facts, what this machine cannot show: a tiny /dev/shm,
more ranks than GPUs, CUDA_VISIBLE_DEVICES mistakes, torch missing, the smoke test's verdict
from its ranks' results, and where an NCCL job's dumps would go. The doctor run on this
machine, and its smoke test on real gloo ranks: tests/jobs/test_doctor_jobs.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from distmon.doctor.collective_smoke import RankResult, assess
from distmon.doctor.host import MiB, shm_check
from distmon.doctor.launch_command import check_launch, parse_launch
from distmon.doctor.results import Status
from distmon.doctor.torch_env import TorchFacts, gpus_check, torch_check, visible_devices_check


def test_tiny_shm_for_the_workers_fails_and_says_how_to_grow_it() -> None:
    check = shm_check(64 * MiB, 60 * MiB, ranks=4, workers=4)
    assert check.status is Status.FAIL and "--shm-size" in check.fix
    assert shm_check(64 * MiB, 64 * MiB, ranks=1, workers=None).status is Status.WARN
    assert shm_check(32 * 1024 * MiB, 32 * 1024 * MiB, ranks=8, workers=8).status is Status.PASS


def test_more_ranks_than_gpus_fails() -> None:
    facts = TorchFacts(version="2.13.0", cuda="12.8", gpus=["NVIDIA H100"] * 2, nccl="2.27.3", gloo=True)
    check = gpus_check("4", 4, facts)
    assert check is not None and check.status is Status.FAIL and "--nproc-per-node=2" in check.fix
    assert gpus_check("2", 2, facts).status is Status.PASS
    assert gpus_check("gpu", None, TorchFacts(version="2.13.0")).status is Status.FAIL


def test_cuda_visible_devices_mistakes() -> None:
    facts = TorchFacts(version="2.13.0", cuda="12.8", gpus=["NVIDIA H100"] * 2)
    assert visible_devices_check("0,0", facts).status is Status.FAIL
    assert visible_devices_check("0,1,2,3", facts).status is Status.FAIL
    assert visible_devices_check("", facts).status is Status.WARN
    assert visible_devices_check("0,1", facts).status is Status.PASS


def test_torch_missing_fails_only_when_a_job_is_to_be_launched() -> None:
    assert torch_check(TorchFacts(), job_given=False).status is Status.WARN
    assert torch_check(TorchFacts(), job_given=True).status is Status.FAIL


def _result(rank: int, host: str = "node-a", torch: str = "2.13.0", **times: float) -> RankResult:
    versions = {"torch": torch, "cuda": "12.8", "nccl": "2.27.3", "python": "3.11.7", "distmon": "0.1.0"}
    return RankResult(rank, host, rank % 4, versions, init=0.1, times=times)


def test_assess_names_the_missing_rank_the_slow_rank_and_the_odd_versions() -> None:
    ok = {"barrier": 0.001, "all_reduce": 0.004, "broadcast": 0.002}
    results = {r: _result(r, **ok) for r in (0, 1, 3)}
    checks, rows = assess(results, 4, timeout=30)
    by_name = {c.name: c for c in checks}
    assert by_name["ranks"].status is Status.FAIL and by_name["ranks"].detail.startswith("rank 2 gave no result")
    assert rows[2]["result"] == "no result"

    results = {r: _result(r, **ok) for r in range(8)}
    results[5] = _result(5, **{**ok, "all_reduce": 0.250})
    results[6] = _result(6, host="node-b", torch="2.12.0", **ok)
    results[7] = _result(7, host="node-b", torch="2.12.0", **ok)
    by_name = {c.name: c for c in assess(results, 8, timeout=30)[0]}
    assert by_name["all_reduce"].status is Status.WARN and "slow on rank 5" in by_name["all_reduce"].detail
    assert by_name["barrier"].status is Status.PASS
    assert by_name["versions"].status is Status.FAIL and "ranks 6-7: torch 2.12.0" in by_name["versions"].detail


def test_assess_reports_init_failures() -> None:
    results = {r: _result(r) for r in (0, 1, 3)}
    for r in results.values():
        r.init, r.failed_at, r.error = None, "init", "DistStoreError: timed out"
    check = {c.name: c for c in assess(results, 4, timeout=10)[0]}["init"]
    assert check.status is Status.FAIL
    assert check.detail == "init_process_group failed on ranks 0-1, 3: DistStoreError: timed out"
    assert check.fix.startswith("rank 2 never joined")


@pytest.mark.parametrize(
    ("env", "status", "words"),
    [
        ({}, "warn", "/tmp/nccl_trace_rank_<rank> (torch's default): node-local"),
        ({"TORCH_NCCL_DUMP_ON_TIMEOUT": "0"}, "warn", "writes no dump"),
        ({"TORCH_FR_BUFFER_SIZE": "0"}, "warn", "the Flight Recorder is off"),
        ({"TORCH_NCCL_TRACE_BUFFER_SIZE": "0"}, "warn", "TORCH_NCCL_TRACE_BUFFER_SIZE=0"),
        ({"TORCH_FR_DUMP_TEMP_FILE": "/no/such/folder/trace_"}, "warn", "/no/such/folder is not a folder"),
        ({"TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "{tmp}/trace_"}, "pass", "(TORCH_NCCL_DEBUG_INFO_TEMP_FILE)"),
        ({"TORCH_FR_DUMP_TEMP_FILE": "{tmp}/trace_"}, "pass", "{tmp}/trace_<rank> (TORCH_FR_DUMP_TEMP_FILE)"),
    ],
)
def test_the_doctor_says_when_an_nccl_jobs_dumps_will_not_be_written(
    tmp_path: Path, env: dict[str, str], status: str, words: str
) -> None:
    from distmon.doctor.dumps import dumps_check

    check = dumps_check({k: v.format(tmp=tmp_path) for k, v in env.items()}, nccl=True)
    assert check.status.value == status and words.format(tmp=tmp_path) in check.detail, check
    assert status == "pass" or check.fix


@pytest.mark.parametrize(
    ("argv", "launcher", "script"),
    [
        (["srun", "-n", "4", "python", "train.py"], "srun", "train.py"),
        (["mpirun", "-np", "4", "python3", "train.py", "--lr", "1"], "mpirun", "train.py"),
        (["accelerate", "launch", "--num_processes", "4", "train.py"], "accelerate", "train.py"),
        (["deepspeed", "--num_gpus", "4", "train.py", "--deepspeed"], "deepspeed", "train.py"),
        (["srun", "torchrun", "--nproc-per-node", "4", "train.py"], "srun", "train.py"),
        (["python", "train.py"], None, "train.py"),
    ],
)
def test_launch_commands_are_recognised(argv: list[str], launcher: str | None, script: str) -> None:
    launch = parse_launch(argv)
    assert (launch.launcher, launch.script) == (launcher, script)


def test_ranks_started_one_per_process_need_the_rendezvous_address(tmp_path) -> None:
    launch = parse_launch(["srun", "-n", "4", "python", "train.py"])
    (tmp_path / "train.py").write_text("")
    bare = check_launch(launch, str(tmp_path), {})
    assert [(c.name, c.status) for c in bare] == [("launcher", Status.WARN), ("launch", Status.PASS)]
    assert "SLURM_PROCID" in bare[0].detail and "MASTER_ADDR and MASTER_PORT" in bare[0].detail
    ready = check_launch(launch, str(tmp_path), {"MASTER_ADDR": "node1", "MASTER_PORT": "29500"})
    assert ready[0].status is Status.PASS


def test_a_multi_node_launch_without_a_relay_per_node_is_told_its_nodes_have_no_eye(tmp_path) -> None:
    (tmp_path / "train.py").write_text("")
    launch = parse_launch(["torchrun", "--nnodes=2", "--nproc-per-node=4", "train.py"])
    (eyes,) = [c for c in check_launch(launch, str(tmp_path), {}) if c.name == "eyes"]
    assert eyes.status is Status.WARN and "judged from their ranks' reports only" in eyes.detail
    assert "distmon run --relay" in (eyes.fix or "")
    relayed = check_launch(launch, str(tmp_path), {"DISTMON_ENDPOINT": "ipc:///tmp/distmon-node.sock"})
    assert [c.status for c in relayed if c.name == "eyes"] == [Status.PASS]
    single = parse_launch(["torchrun", "--nproc-per-node=4", "train.py"])
    assert not [c for c in check_launch(single, str(tmp_path), {}) if c.name == "eyes"]
