"""A pipeline-parallel job on CPU (gloo) with ``torch.distributed.pipelining``, optionally
times data parallel, that can stall one stage or deadlock two.

Stages pass activations forward and gradients back with point-to-point sends and receives;
each rank holds one stage, a linear layer. With ``--dp 2``, ranks are laid out as
``rank = stage * dp + replica`` (pipeline groups ``[0, 2]`` and ``[1, 3]`` for 4 ranks, data
parallel groups ``[0, 1]`` and ``[2, 3]``), and the gradients are all-reduced over the data
parallel group after each pipeline step::

    torchrun --nproc_per_node=4 examples/pipeline.py --schedule 1f1b --distmon --stall-rank 2

Faults:

- ``--stall-rank R``: at ``--stall-step``, rank R sleeps ``--stall-seconds`` in its stage's
  forward. Its neighbours block in a send to it and a receive from it, the stages beyond
  them behind those, and their data-parallel peers in the next all-reduce.
- ``--deadlock-rank R``: at ``--deadlock-step``, rank R and the next stage each receive from
  the other before sending: two blocking receives facing each other.
"""

from __future__ import annotations

import argparse
import datetime
import time

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}
WIDTH = 16


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--schedule", choices=sorted(SCHEDULES), default="1f1b")
    p.add_argument("--dp", type=int, default=1, help="data-parallel replicas of the pipeline")
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--step-time", type=float, default=0.05, help="extra seconds per step")
    p.add_argument("--stall-rank", type=int, default=-1)
    p.add_argument("--stall-step", type=int, default=20)
    p.add_argument("--stall-seconds", type=float, default=600.0)
    p.add_argument("--deadlock-rank", type=int, default=-1)
    p.add_argument("--deadlock-step", type=int, default=50)
    p.add_argument("--timeout", type=float, default=120.0, help="collective timeout, seconds")
    p.add_argument("--distmon", action="store_true", help="attach distmon's hook")
    return p.parse_args()


class Stage(torch.nn.Module):
    """One linear layer; its forward can be told to sleep (the injected stall)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(WIDTH, WIDTH)
        self.sleep = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.sleep:
            seconds, self.sleep = self.sleep, 0.0
            time.sleep(seconds)
        return torch.relu(self.layer(x))


def groups(dp: int) -> tuple[dist.ProcessGroup, dist.ProcessGroup | None, int, int]:
    """This rank's pipeline group and data-parallel group (None without data parallelism),
    its stage and the number of stages. Every rank creates every group, in the same order."""
    rank, world = dist.get_rank(), dist.get_world_size()
    stages = world // dp
    if dp == 1:
        return dist.group.WORLD, None, rank, stages
    mine = {}
    for replica in range(dp):
        ranks = [stage * dp + replica for stage in range(stages)]
        group = dist.new_group(ranks, group_desc="pp")
        if rank in ranks:
            mine["pp"] = group
    for stage in range(stages):
        ranks = [stage * dp + replica for replica in range(dp)]
        group = dist.new_group(ranks, group_desc="dp")
        if rank in ranks:
            mine["dp"] = group
    return mine["pp"], mine["dp"], rank // dp, stages


def main() -> None:
    args = parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))
    if args.distmon:
        import distmon.hooks

        distmon.hooks.attach()
    rank = dist.get_rank()
    pp_group, dp_group, stage_index, stages = groups(args.dp)
    torch.manual_seed(stage_index)
    module = Stage()
    if args.distmon:
        distmon.hooks.attach(module)
    batch = 2 * args.microbatches
    shape = (batch // args.microbatches, WIDTH)
    received = torch.zeros(shape, requires_grad=stage_index > 0)  # an activation: its gradient goes back
    produced = torch.zeros(shape, requires_grad=True)
    stage = PipelineStage(module, stage_index, stages, torch.device("cpu"), received, produced, group=pp_group)
    last = stage_index == stages - 1

    def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.mse_loss(output, target)

    schedule = SCHEDULES[args.schedule](stage, n_microbatches=args.microbatches, loss_fn=loss_fn)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.01)
    pp_rank = dist.get_rank(pp_group)
    for step in range(args.steps):
        if rank == args.stall_rank and step == args.stall_step:
            announce(rank, "stall", step)
            module.sleep = args.stall_seconds
        if step == args.deadlock_step and args.deadlock_rank >= 0:
            deadlock(rank, args.deadlock_rank, pp_rank, pp_group, step)
        optimizer.zero_grad()
        x, y = torch.randn(batch, WIDTH), torch.randn(batch, WIDTH)
        if stage_index == 0:
            schedule.step(x)
        elif last:
            schedule.step(target=y)
        else:
            schedule.step()
        if dp_group is not None:
            for p in module.parameters():
                dist.all_reduce(p.grad, group=dp_group)
        optimizer.step()
        time.sleep(args.step_time)
    dist.barrier()
    dist.destroy_process_group()


def deadlock(rank: int, culprit: int, pp_rank: int, pp_group: dist.ProcessGroup, step: int) -> None:
    """The culprit and the stage after it each wait to receive from the other first."""
    culprit_stage = dist.get_group_rank(pp_group, culprit) if culprit in dist.get_process_group_ranks(pp_group) else -1
    if culprit_stage < 0 or pp_rank not in (culprit_stage, culprit_stage + 1):
        return
    announce(rank, "deadlock", step)
    peer = dist.get_global_rank(pp_group, culprit_stage + 1 if pp_rank == culprit_stage else culprit_stage)
    message = torch.zeros(WIDTH)
    dist.recv(message, peer, group=pp_group)
    dist.send(message, peer, group=pp_group)


def announce(rank: int, fault: str, step: int) -> None:
    """The line tests and benchmarks measure detection latency from."""
    print(f"[pipeline] rank {rank}: injecting {fault} at step {step}, t={time.time():.3f}", flush=True)


if __name__ == "__main__":
    main()
