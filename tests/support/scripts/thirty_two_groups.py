"""A 3-rank gloo job in which every rank is in 32 process groups besides the world, with
distmon attached: each step all-reduces in every group, then steps an optimizer. At step
``--at`` rank ``--culprit`` sleeps before the all-reduce of the last group created (``g31``),
so the others wait in it. A monitor that kept 16 groups a rank did not see that wait. Run by
tests/jobs/test_many_groups_job.py under torchrun.
"""

from __future__ import annotations

import argparse
import datetime
import time

import torch
import torch.distributed as dist

import distmon.hooks

GROUPS = 32


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--culprit", type=int, default=2)
    p.add_argument("--at", type=int, default=5)
    args = p.parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    distmon.hooks.attach()
    groups = [dist.new_group(list(range(world)), group_desc=f"g{k:02d}") for k in range(GROUPS)]
    weight = torch.nn.Parameter(torch.ones(4))
    optimizer = torch.optim.SGD([weight], lr=0.0)
    for step in range(1, 10_000):
        for k, group in enumerate(groups):
            if k == GROUPS - 1 and step == args.at and rank == args.culprit:
                print(f"[thirty_two_groups] rank {rank}: stalls before the all-reduce of g{k:02d}", flush=True)
                time.sleep(120)  # the test ends the job long before
            dist.all_reduce(torch.ones(4), group=group)
        weight.grad = torch.zeros(4)
        optimizer.step()
        time.sleep(0.05)


if __name__ == "__main__":
    main()
