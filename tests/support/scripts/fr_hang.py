"""A 4-rank gloo job that hangs one way, and leaves what a job without distmon leaves: one
Flight Recorder dump per rank, ``PREFIX<rank>``, as torch writes them on a timeout.

Ranks 0-1 are pipeline stage 0 and 2-3 stage 1; each step rank r of stage 0 sends to r + 2
(stage 1 prefetches it with irecv), then the tensor-parallel pairs (0, 1) and (2, 3), the
data-parallel pairs (0, 2) and (1, 3) and the world all-reduce. At step ``--at`` the culprit
(rank 1 unless told):

- ``stall``: sleeps before its tensor-parallel all-reduce (I/O, a lock);
- ``busy``: spins in its own Python code there, issuing no collective;
- ``nosend``: a stage-0 rank stuck before it sends to its stage-1 peer;
- ``kill``: dies by SIGKILL there, without a dump: the others' dumps are the evidence. Gloo
  fails a collective at once when a peer dies (and its recorder marks it retired), where
  NCCL's survivors wait for the watchdog and dump with the collective still pending; so the
  culprit stands still until the others have dumped, as NCCL's would have, then dies.

Odd ranks write torch's JSON dump, even ranks its pickle (with stack traces). Every rank
writes ``PREFIX<rank>.at`` when it reaches step ``--at``, and dumps its recorder
once ``PREFIX`` + ``go`` exists and its recorder stands still (or at once, when a collective
fails because a peer died), then exits with status 1, as torch's watchdog ends a rank whose
collective timed out. The CPU recorder leaves ``pg_config`` empty where
NCCL's lists every group: the dump is given the groups in NCCL's shape, as NCCL would have
written them. Run by tests/jobs/test_analyze_jobs.py under torchrun.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import signal
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as c10d

TP = [[0, 1], [2, 3]]
DP = [[0, 2], [1, 3]]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--prefix", required=True)
    p.add_argument("--fault", choices=["stall", "busy", "nosend", "kill"], required=True)
    p.add_argument("--culprit", type=int, default=1)
    p.add_argument("--at", type=int, default=3)
    p.add_argument("--distmon", action="store_true", help="attach distmon's hook too (the live monitor's view)")
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if args.distmon:
        import distmon.hooks

        distmon.hooks.attach()
    groups: dict[str, tuple[dist.ProcessGroup, list[int]]] = {}
    for desc, partitions in (("tp", TP), ("dp", DP)):
        for ranks in partitions:
            group = dist.new_group(ranks, group_desc=desc)
            if rank in ranks:
                groups[desc] = (group, ranks)
    prefix = Path(args.prefix)
    if not (rank == args.culprit and args.fault == "kill"):
        threading.Thread(target=dump_when_told, args=(prefix, rank, groups), daemon=True).start()
    t, got = torch.ones(4), torch.ones(4)
    try:
        for step in range(1, 1000):
            culprit = step == args.at and rank == args.culprit
            if step == args.at:
                arrived(prefix, rank)
            if culprit and args.fault == "nosend":
                fault(args.fault, prefix)
            if rank < 2:
                dist.send(t, rank + 2)
            else:
                pending = dist.irecv(got, rank - 2)  # the next stage's input, prefetched
            if culprit and args.fault != "nosend":
                fault(args.fault, prefix)
            dist.all_reduce(t, group=groups["tp"][0])
            dist.all_reduce(t, group=groups["dp"][0])
            dist.all_reduce(t)
            if rank >= 2:
                pending.wait()
    except RuntimeError:
        write_dump(prefix, rank, groups)
        os._exit(1)


def fault(kind: str, prefix: Path) -> None:
    if kind == "kill":
        others = [Path(f"{prefix}{r}") for r in range(dist.get_world_size()) if r != dist.get_rank()]
        while not all(p.exists() for p in others):
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind in ("stall", "nosend"):
        while True:
            time.sleep(0.05)
    elif kind == "busy":
        x = 1.0
        while True:
            x = x * 1.000001 + 1e-9


def arrived(prefix: Path, rank: int) -> None:
    Path(f"{prefix}{rank}.at").touch()


def dump_when_told(prefix: Path, rank: int, groups: dict[str, tuple[dist.ProcessGroup, list[int]]]) -> None:
    """Once told, and once this rank's recorder stands still (it has reached its hang)."""
    go = Path(f"{prefix}go")
    while not go.exists():
        time.sleep(0.05)
    before = None
    while (now := c10d._dump_fr_trace(includeCollectives=False, includeStackTraces=False)) != before:
        before = now
        time.sleep(0.3)
    write_dump(prefix, rank, groups)
    peers_dumped(prefix)
    os._exit(1)


def peers_dumped(prefix: Path, wait: float = 60.0) -> None:
    """Until every rank that will dump has: a rank that exits first fails its peers' pending
    collectives at once (gloo), and a peer dumping after that would show them retired."""
    others = [Path(f"{prefix}{r}") for r in range(dist.get_world_size())]
    deadline = time.monotonic() + wait
    while not all(p.exists() for p in others) and time.monotonic() < deadline:
        time.sleep(0.05)


ONCE = threading.Lock()
"""One dump a rank, as torch writes: the first to come (the main thread when a collective
fails because a peer died, else the dumper when told) writes it, the other waits for it; a
later dump, after peers exit, would show the collectives failed rather than waiting."""


def write_dump(prefix: Path, rank: int, groups: dict[str, tuple[dist.ProcessGroup, list[int]]]) -> None:
    with ONCE:
        if not Path(f"{prefix}{rank}").exists():
            _write_dump(prefix, rank, groups)


def _write_dump(prefix: Path, rank: int, groups: dict[str, tuple[dist.ProcessGroup, list[int]]]) -> None:
    as_json = rank % 2 == 1  # odd ranks write torch's JSON dump, even ones its pickle
    if as_json:
        dump = json.loads(c10d._dump_fr_trace_json(includeCollectives=True))
    else:
        dump = pickle.loads(c10d._dump_fr_trace(includeCollectives=True, includeStackTraces=True))
    config = {name: c for name, c in dump.get("pg_config", {}).items() if name}
    world = dist.get_world_size()
    config.setdefault("0", {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))})
    for desc, (group, ranks) in groups.items():
        name = dist.distributed_c10d._get_process_group_name(group)
        config.setdefault(name, {"name": name, "desc": desc, "ranks": str(ranks)})
    dump["pg_config"] = config
    part = Path(f"{prefix}{rank}.part")
    part.write_bytes(json.dumps(dump).encode() if as_json else pickle.dumps(dump))
    part.rename(f"{prefix}{rank}")


if __name__ == "__main__":
    main()
