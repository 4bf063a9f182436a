"""A tensor x data parallel job on CPU (gloo), laid out as Megatron does, that can stall one
rank or deadlock two.

Tensor-parallel groups are adjacent ranks (``--tp`` of them); data-parallel groups take one
rank of each. Every step issues an all-reduce in the rank's TP group (the row-parallel
layer's partial sums) and DDP's gradient all-reduce in its DP group, then a barrier on the
world group every ``--barrier-every`` steps::

    torchrun --nproc_per_node=8 examples/parallel.py --tp 2 --distmon --stall-rank 5

Faults:

- ``--stall-rank R``: at ``--stall-step``, rank R sleeps ``--stall-seconds`` before its TP
  all-reduce. Its TP peer waits in the TP group; every DP group then waits for one of them.
- ``--deadlock-rank R``: at ``--deadlock-step``, rank R enters the world barrier before its
  TP all-reduce, while its TP peer does the opposite: each waits for the other, forever.
"""

from __future__ import annotations

import argparse
import datetime
import time

import torch
import torch.distributed as dist


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tp", type=int, default=2, help="tensor-parallel size")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--step-time", type=float, default=0.05, help="extra seconds per step")
    p.add_argument("--barrier-every", type=int, default=10)
    p.add_argument("--stall-rank", type=int, default=-1)
    p.add_argument("--stall-step", type=int, default=20)
    p.add_argument("--stall-seconds", type=float, default=600.0)
    p.add_argument("--deadlock-rank", type=int, default=-1)
    p.add_argument("--deadlock-step", type=int, default=50)
    p.add_argument("--timeout", type=float, default=120.0, help="collective timeout, seconds")
    p.add_argument("--distmon", action="store_true", help="attach distmon's hook")
    return p.parse_args()


def parallel_groups(tp: int) -> tuple[dist.ProcessGroup, dist.ProcessGroup]:
    """This rank's TP and DP groups. Every rank creates every group, in the same order."""
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = {}
    for start in range(0, world, tp):
        ranks = list(range(start, start + tp))
        group = dist.new_group(ranks, group_desc="tp")
        if rank in ranks:
            mine["tp"] = group
    for offset in range(tp):
        ranks = list(range(offset, world, tp))
        group = dist.new_group(ranks, group_desc="dp")
        if rank in ranks:
            mine["dp"] = group
    return mine["tp"], mine["dp"]


def main() -> None:
    args = parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))
    rank = dist.get_rank()
    tp_group, dp_group = parallel_groups(args.tp)
    torch.manual_seed(rank % args.tp)  # a shard of the layer per TP rank, replicated across DP
    shard = torch.nn.Linear(32, 16)
    model = torch.nn.parallel.DistributedDataParallel(shard, process_group=dp_group)
    if args.distmon:
        import distmon.hooks

        distmon.hooks.attach(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(args.steps):
        x = torch.randn(8, 32)
        partial = model(x)
        if rank == args.stall_rank and step == args.stall_step:
            announce(rank, "stall", step)
            time.sleep(args.stall_seconds)
        odd_order = step == args.deadlock_step and args.deadlock_rank >= 0
        if odd_order and rank == args.deadlock_rank:
            announce(rank, "deadlock", step)
            dist.barrier()
        summed = partial.detach().clone()
        dist.all_reduce(summed, group=tp_group)
        if odd_order and rank != args.deadlock_rank:
            dist.barrier()
        loss = (partial + (summed - partial.detach())).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % args.barrier_every == 0:
            dist.barrier()
        time.sleep(args.step_time)
    dist.barrier()
    dist.destroy_process_group()


def announce(rank: int, fault: str, step: int) -> None:
    """The line tests and benchmarks measure detection latency from."""
    print(f"[parallel] rank {rank}: injecting {fault} at step {step}, t={time.time():.3f}", flush=True)


if __name__ == "__main__":
    main()
