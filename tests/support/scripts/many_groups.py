"""A 4-rank gloo job with overlapping process groups, each issuing a known number of
collectives and point-to-point messages, with distmon attached: what every rank must report,
group by group and channel by channel.

The groups are the awkward kind: subgroups a rank is not in (so its process-local group
ids and the groups' names differ), one without a description, DeviceMesh dimensions, and
one created after collectives have run. Some carry p2p messages between their collectives
(gloo counts those in the group's sequence numbers, so the collective counts must not), by
blocking send/recv, isend/irecv and batch_isend_irecv, and one message goes before distmon
attaches. Run by tests/jobs/test_group_jobs.py under torchrun.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from many_groups_plan import GROUPS, MESSAGES  # beside this script, on its sys.path
from torch.distributed.device_mesh import init_device_mesh

import distmon.hooks


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    dist.barrier()
    ring(rank)  # p2p on the world group before distmon attaches: counted all the same
    distmon.hooks.attach()
    mine: dict[str, dist.ProcessGroup] = {}
    for desc in ("pair_a", "pair_b", "cross", ""):
        (ranks,) = GROUPS[desc][0]
        group = dist.new_group(ranks, group_desc=desc or None)
        if rank in ranks:
            mine[desc] = group
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    mine["mesh_dp"], mine["mesh_tp"] = mesh.get_group("dp"), mesh.get_group("tp")
    ring(rank)
    issue(mine)
    (late_ranks,) = GROUPS["late"][0]
    late = dist.new_group(late_ranks, group_desc="late")
    if rank in late_ranks:
        issue({"late": late})
    dist.barrier()
    time.sleep(2.0)  # a few reports with the final counts
    dist.destroy_process_group()


def ring(rank: int) -> None:
    world = dist.get_world_size()
    ops = [
        dist.P2POp(dist.isend, torch.ones(4), (rank + 1) % world),
        dist.P2POp(dist.irecv, torch.zeros(4), (rank - 1) % world),
    ]
    for work in dist.batch_isend_irecv(ops):
        work.wait()


def issue(groups: dict[str, dist.ProcessGroup]) -> None:
    """Each group's collectives, with its messages between the first and the rest."""
    rank = dist.get_rank()
    for desc, group in groups.items():
        for k in range(GROUPS[desc][1]):
            dist.all_reduce(torch.ones(4), group=group)
            if k == 0:
                exchange(rank, MESSAGES.get(desc, []), group)


def exchange(rank: int, messages: list[tuple[int, int]], group: dist.ProcessGroup) -> None:
    """Blocking sends, and receives posted with irecv and waited for at once."""
    for src, dst in messages:
        if rank == src:
            dist.send(torch.ones(4), dst, group=group)
        elif rank == dst:
            dist.irecv(torch.zeros(4), src, group=group).wait()


if __name__ == "__main__":
    main()
