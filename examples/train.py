"""A small DDP training job on CPU (gloo) that can break in each of the ways real jobs do.

Run it under torchrun; distmon watches it when ``--distmon`` is given (the one line a user
adds) or when launched with ``distmon run``::

    torchrun --nproc_per_node=4 examples/train.py --distmon --fault hang --fault-rank 2

Faults (``--fault``), injected on ``--fault-rank`` at ``--fault-step``:

- ``hang``: the rank sleeps before its next collective (a stuck rank)
- ``extra-collective``: the rank issues a barrier the others do not (rank-conditional code)
- ``uneven``: the rank runs out of data a step early and goes to the end-of-epoch barrier
- ``exception``: the rank raises
- ``sigkill``: the rank kills itself with SIGKILL (the OOM killer, a node going away)
- ``worker-kill``: one of the rank's DataLoader workers is killed with SIGKILL
- ``gil``: the rank blocks in native code holding the GIL
- ``late-init``: the rank sleeps before ``init_process_group`` (a node late to start)
- ``loader-block``: the rank's DataLoader worker blocks in ``__getitem__`` (a dead NFS
  mount); ``--fault-rank -1`` blocks every rank's
- ``straggler``: the rank is slower on every step from the start
- ``leak``: the rank keeps every batch in a list, so its memory grows step over step
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import os
import signal
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler

FAULTS = (
    "none",
    "hang",
    "extra-collective",
    "uneven",
    "exception",
    "sigkill",
    "worker-kill",
    "gil",
    "straggler",
    "leak",
    "late-init",
    "loader-block",
)


class Noise(Dataset):
    def __init__(self, size: int, dim: int, block: tuple[int, float] | None = None) -> None:
        self.size, self.dim = size, dim
        self.block = block
        """(first sample index, seconds): from that sample on, reading one blocks that long."""

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.block is not None and i >= self.block[0]:
            worker = torch.utils.data.get_worker_info()
            announce(int(os.environ.get("RANK", "-1")), f"loader-block(worker-{worker.id})", i)
            time.sleep(self.block[1])  # a read from a dead NFS mount
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.dim, generator=g), torch.randn(1, generator=g)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200, help="steps per epoch")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--step-time", type=float, default=0.05, help="extra seconds per step")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers per rank")
    p.add_argument("--fault", choices=FAULTS, default="none")
    p.add_argument("--fault-rank", type=int, default=1)
    p.add_argument("--fault-step", type=int, default=20)
    p.add_argument("--hang-seconds", type=float, default=600.0)
    p.add_argument("--timeout", type=float, default=120.0, help="collective timeout, seconds")
    p.add_argument("--distmon", action="store_true", help="attach distmon's hook")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    if args.fault == "late-init" and int(os.environ.get("RANK", "0")) == args.fault_rank:
        announce(args.fault_rank, args.fault, 0)
        time.sleep(args.hang_seconds)  # loading a checkpoint, or a node slow to come up
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    )
    if args.distmon:
        import distmon.hooks

        distmon.hooks.attach(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    faulty = rank == args.fault_rank
    steps = args.steps - (1 if faulty and args.fault == "uneven" else 0)
    dataset = Noise(args.steps * args.batch_size * world, 32, block=blocked_sample(args, rank, world))
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=False)
    loader = DataLoader(dataset, args.batch_size, sampler=sampler, num_workers=args.workers)
    kept: list[torch.Tensor] = []
    for epoch in range(args.epochs):
        for step, (x, y) in enumerate(loader):
            if step >= steps:
                if faulty and args.fault == "uneven":
                    announce(rank, "uneven", step)  # out of data one batch early
                break
            if faulty and step == args.fault_step and args.fault not in ("none", "uneven", "late-init", "loader-block"):
                announce(rank, args.fault, step)
                inject(args, worker_pids())
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            time.sleep(args.step_time * (4 if faulty and args.fault == "straggler" else 1))
            if faulty and args.fault == "leak" and step >= args.fault_step:
                kept.append(torch.ones(1024 * 1024))  # 4 MB a step
        dist.barrier()
        if rank == 0:
            print(f"epoch {epoch} done, loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


def blocked_sample(args: argparse.Namespace, rank: int, world: int) -> tuple[int, float] | None:
    """For ``loader-block``: the first sample index (of this rank's shard) whose read blocks."""
    if args.fault != "loader-block" or args.fault_rank not in (rank, -1):
        return None
    return args.fault_step * args.batch_size * world, args.hang_seconds


def announce(rank: int, fault: str, step: int) -> None:
    """The line tests and benchmarks measure detection latency from."""
    print(f"[train] rank {rank}: injecting {fault} at step {step}, t={time.time():.3f}", flush=True)


def inject(args: argparse.Namespace, worker_pids: list[int]) -> None:
    fault = args.fault
    if fault == "hang":
        time.sleep(args.hang_seconds)
    elif fault == "extra-collective":
        dist.barrier()
    elif fault == "exception":
        raise ValueError(f"shape mismatch in batch {args.fault_step}: expected [16, 32], got [16, 31]")
    elif fault == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif fault == "worker-kill" and worker_pids:
        os.kill(worker_pids[0], signal.SIGKILL)
        time.sleep(args.hang_seconds)  # PyTorch's SIGCHLD handler raises in here
    elif fault == "gil":
        # ctypes.PyDLL keeps the GIL during the call, like a C extension that forgets to
        # release it: every Python thread in the process, distmon's included, stops.
        ctypes.PyDLL(None).sleep(int(args.hang_seconds))


def worker_pids() -> list[int]:
    """Pids of this rank's DataLoader workers: its child processes."""
    import psutil

    return [c.pid for c in psutil.Process().children()]


if __name__ == "__main__":
    main()
