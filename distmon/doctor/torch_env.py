"""torch, CUDA, NCCL and the GPUs a node's ranks will share. torch is imported here only,
and only when the checks run: the doctor also runs where torch is not installed."""

from __future__ import annotations

import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from distmon.doctor.results import Check, failed, passed, warned
from distmon.launch import FR_BUFFER_VARIABLES, FR_ENTRIES


@dataclass
class TorchFacts:
    version: str | None = None
    """None when torch is not installed."""
    error: str | None = None
    """Why importing torch failed."""
    cuda: str | None = None
    """The CUDA version torch was built with; None for a CPU-only build."""
    gpus: list[str] = field(default_factory=list)
    nccl: str | None = None
    gloo: bool = False


def torch_facts() -> TorchFacts:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return TorchFacts()
    try:
        import torch
        import torch.distributed as dist
    except Exception as e:
        return TorchFacts(version="?", error=f"{type(e).__name__}: {e}")
    facts = TorchFacts(version=torch.__version__, cuda=torch.version.cuda)
    facts.gloo = dist.is_available() and dist.is_gloo_available()
    if torch.cuda.is_available():
        facts.gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    if dist.is_available() and dist.is_nccl_available() and facts.gpus:
        facts.nccl = ".".join(map(str, torch.cuda.nccl.version()))
    return facts


def torch_check(facts: TorchFacts, job_given: bool) -> Check:
    where = f"{sys.executable}, Python {platform.python_version()}"
    if facts.error:
        return failed("torch", f"importing torch fails: {facts.error}", "reinstall torch in this environment")
    if facts.version is None:
        detail = f"torch is not installed for {where}"
        if job_given:
            return failed(
                "torch", detail, f"{sys.executable} -m pip install torch, or run the doctor in the job's environment"
            )
        return warned(
            "torch",
            detail + " (fine where only the monitor runs)",
            "run the doctor in the training environment to check it",
        )
    backends = ", ".join(b for b, ok in (("gloo", facts.gloo), ("nccl", facts.nccl is not None)) if ok) or "none"
    return passed("torch", f"torch {facts.version} ({where}); distributed backends: {backends}")


def cuda_check(facts: TorchFacts) -> Check:
    if facts.version is None or facts.error:
        return warned("cuda", "not checked without torch", "install torch to check CUDA and NCCL")
    if not facts.gpus:
        build = f"a CUDA {facts.cuda} build" if facts.cuda else "a CPU-only build"
        return warned(
            "cuda",
            f"no GPU: CUDA and NCCL unavailable ({build} of torch), use gloo",
            "init_process_group('gloo') on this machine; for NCCL run on a GPU node with a CUDA build of torch",
        )
    names = ", ".join(sorted(set(facts.gpus)))
    return passed("cuda", f"CUDA {facts.cuda}, NCCL {facts.nccl or 'unavailable'}, {len(facts.gpus)} GPUs ({names})")


def ranks_per_node(nproc: str | None, facts: TorchFacts, cpus: int) -> int | None:
    """torchrun's ``--nproc-per-node`` as a number; None when it cannot be resolved."""
    if nproc is None:
        return None
    if nproc == "gpu":
        return len(facts.gpus) or None
    if nproc in ("auto", "cpu"):
        return len(facts.gpus) or cpus if nproc == "auto" else cpus
    try:
        return int(nproc)
    except ValueError:
        return None


def gpus_check(nproc: str | None, ranks: int | None, facts: TorchFacts) -> Check | None:
    """One GPU per rank: NCCL refuses two ranks on one device ("Duplicate GPU detected")."""
    if nproc is None:
        return None
    if ranks is None:
        if nproc == "gpu":
            return failed(
                "gpus",
                "--nproc-per-node=gpu on a machine with no GPU: torchrun stops at once",
                "--nproc-per-node=N with a number, and the gloo backend",
            )
        return failed("gpus", f"--nproc-per-node={nproc} is not a number, gpu, cpu or auto", "--nproc-per-node=N")
    if not facts.gpus:
        return passed("gpus", f"{ranks} ranks per node on CPU (no GPU)")
    if ranks > len(facts.gpus):
        return failed(
            "gpus",
            f"{ranks} processes per node but {len(facts.gpus)} GPUs visible: with NCCL two ranks share a GPU and fail",
            f"--nproc-per-node={len(facts.gpus)}, or make more GPUs visible (CUDA_VISIBLE_DEVICES)",
        )
    unused = f"; {len(facts.gpus) - ranks} GPUs left idle" if ranks < len(facts.gpus) else ""
    return passed("gpus", f"{ranks} processes per node, {len(facts.gpus)} GPUs visible{unused}")


def visible_devices_check(value: str | None, facts: TorchFacts) -> Check:
    if value is None:
        return passed("cuda_visible_devices", "not set" + (": every GPU is visible" if facts.gpus else ""))
    listed = [v.strip() for v in value.split(",") if v.strip()]
    if not listed or listed[0] == "-1":
        return warned(
            "cuda_visible_devices",
            f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU",
            "unset it, or list the GPUs this job may use, e.g. 0,1,2,3",
        )
    if len(set(listed)) < len(listed):
        return failed("cuda_visible_devices", f"CUDA_VISIBLE_DEVICES={value} lists a GPU twice", "list each GPU once")
    if not facts.gpus:
        return warned(
            "cuda_visible_devices",
            f"CUDA_VISIBLE_DEVICES={value}, but no GPU is usable here",
            "check the driver (nvidia-smi) and that torch is a CUDA build",
        )
    if len(facts.gpus) < len(listed):
        return failed(
            "cuda_visible_devices",
            f"CUDA_VISIBLE_DEVICES={value} lists {len(listed)} GPUs but only {len(facts.gpus)} are usable: "
            "CUDA stops at the first index that does not exist",
            "list only GPUs that exist (nvidia-smi -L)",
        )
    return passed("cuda_visible_devices", f"CUDA_VISIBLE_DEVICES={value}: {len(facts.gpus)} GPUs visible")


def flight_recorder_check(facts: TorchFacts, env: Mapping[str, str]) -> Check | None:
    """PyTorch's Flight Recorder, where distmon reads each group's collective sequence
    numbers: on by default in recent torch, off when its buffer size is 0. Proven by recording
    one all-reduce on a group of one, in this process."""
    if facts.version is None or facts.error or not facts.gloo:
        return None
    fix = f"unset {' and '.join(FR_BUFFER_VARIABLES)}, or set TORCH_FR_BUFFER_SIZE={FR_ENTRIES} (distmon run does)"
    setting = next((f"{name}={env[name]}" for name in FR_BUFFER_VARIABLES if name in env), None)
    try:
        recorded = _records_a_collective()
    except Exception as e:
        return warned("flight_recorder", f"could not try it: {type(e).__name__}: {e}", fix)
    if not recorded:
        off = f"off ({setting})" if setting else f"off by default in torch {facts.version}"
        return warned(
            "flight_recorder",
            f"the Flight Recorder is {off}: distmon sees no collective sequence numbers and tells "
            "hangs by the ranks' stacks only",
            fix,
        )
    size = setting or f"torch {facts.version}'s default size"
    return passed("flight_recorder", f"on ({size}): collectives are recorded with their sequence numbers")


def _records_a_collective() -> bool:
    import datetime
    import pickle

    import torch
    import torch.distributed as dist
    from torch._C import _distributed_c10d as c10d

    group = dist.ProcessGroupGloo(dist.HashStore(), 0, 1, datetime.timedelta(seconds=10))
    group.allreduce([torch.ones(1)]).wait()
    dump = pickle.loads(c10d._dump_fr_trace(includeCollectives=True, includeStackTraces=False))  # type: ignore[attr-defined]
    return bool(dump.get("entries"))
