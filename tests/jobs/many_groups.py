"""A 4-rank gloo job with overlapping process groups, each issuing a known number of
collectives, with distmon attached: what every rank must report, group by group.

The groups are the awkward kind: subgroups a rank is not in (so its process-local group
ids and the groups' names differ), one without a description, DeviceMesh dimensions, and
one created after collectives have run. Run by tests/test_group_jobs.py under torchrun.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

import distmon.hooks

GROUPS: dict[str, tuple[list[list[int]], int]] = {
    "pair_a": ([[0, 1]], 1),
    "pair_b": ([[2, 3]], 2),
    "cross": ([[0, 2]], 3),
    "": ([[1, 3]], 4),
    "mesh_dp": ([[0, 2], [1, 3]], 5),
    "mesh_tp": ([[0, 1], [2, 3]], 6),
    "late": ([[0, 3]], 7),
}
"""desc -> (the groups of that description, collectives each issues). "" has no description."""
BARRIERS = 2
"""Collectives on the world group (``default_pg``)."""


def main() -> None:
    dist.init_process_group("gloo")
    distmon.hooks.attach()
    rank = dist.get_rank()
    mine: dict[str, dist.ProcessGroup] = {}
    for desc in ("pair_a", "pair_b", "cross", ""):
        (ranks,) = GROUPS[desc][0]
        group = dist.new_group(ranks, group_desc=desc or None)
        if rank in ranks:
            mine[desc] = group
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    mine["mesh_dp"], mine["mesh_tp"] = mesh.get_group("dp"), mesh.get_group("tp")
    dist.barrier()
    issue(mine)
    (late_ranks,) = GROUPS["late"][0]
    late = dist.new_group(late_ranks, group_desc="late")
    if rank in late_ranks:
        issue({"late": late})
    dist.barrier()
    time.sleep(2.0)  # a few reports with the final counts
    dist.destroy_process_group()


def issue(groups: dict[str, dist.ProcessGroup]) -> None:
    for desc, group in groups.items():
        for _ in range(GROUPS[desc][1]):
            dist.all_reduce(torch.ones(4), group=group)


if __name__ == "__main__":
    main()
