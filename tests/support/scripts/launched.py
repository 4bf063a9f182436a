"""A job started by a launcher that gives its ranks no ``RANK``: the ways people start a job
besides torchrun, srun and mpirun. One rank falls asleep at ``--step``; the others wait for it.

    python launched.py --launch spawn      # torch.multiprocessing.spawn, as PyTorch's DDP tutorial
    python launched.py --launch argv       # a launcher of its own: each rank gets --rank on its command line
    python launched.py --launch lightning  # Lightning's DDP launcher (local ranks 1..n-1 re-run this command)
    torchrun --nproc-per-node=4 launched.py --launch none --distmon   # torchrun, with the hook

Each rank waits for its all-reduce as on a GPU (``--gpu``): the collective returns at once
(``async_op=True``, as NCCL's does) and the rank spins at a later sync point until it completes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import torch
import torch.distributed as dist


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--launch", choices=["spawn", "argv", "lightning", "none"], default="spawn")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--rank", type=int, default=None, help="this process's rank (--launch argv)")
    p.add_argument("--world-size", type=int, default=None)
    p.add_argument("--asleep", type=int, default=2, help="the rank that falls asleep")
    p.add_argument("--step", type=int, default=20)
    p.add_argument("--seconds", type=float, default=300.0)
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--gpu", action="store_true", help="wait for each all-reduce at a later sync point")
    p.add_argument("--distmon", action="store_true", help="attach the hook")
    return p.parse_args()


def train(rank: int, args: argparse.Namespace, model: torch.nn.Module | None = None) -> None:
    """The training loop of one rank, its process group already made."""
    model = model or torch.nn.Linear(64, 64)
    if args.distmon:
        import distmon.hooks

        distmon.hooks.attach(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(args.steps):
        loss = model(torch.randn(32, 64)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        if rank == args.asleep and step == args.step:
            print(f"[launched] rank {rank}: injecting sleep at step {step}, t={time.time():.3f}", flush=True)
            time.sleep(args.seconds)
        grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        if args.gpu:
            work = dist.all_reduce(grads, async_op=True)  # returns at once, as NCCL's does
            optimizer.step()
            sync(work)
        else:
            dist.all_reduce(grads)
            optimizer.step()
        time.sleep(0.02)


def sync(work: dist.Work) -> None:
    """Where the rank waits for its collective: busy, as a CUDA stream synchronization spins."""
    while not work.is_completed():
        pass


def spawned(index: int, args: argparse.Namespace) -> None:
    """What ``mp.spawn`` runs in each rank: the index is the rank, as in PyTorch's tutorial;
    the variables set here, after the process started."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = os.environ["JOB_PORT"]
    dist.init_process_group("gloo", rank=index, world_size=args.ranks)
    train(index, args)


def main() -> None:
    args = parse()
    if args.launch == "spawn":
        torch.multiprocessing.spawn(spawned, args=(args,), nprocs=args.ranks)
    elif args.launch == "argv" and args.rank is None:
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": os.environ["JOB_PORT"]}
        argv = [sys.executable, *sys.argv, "--world-size", str(args.ranks)]
        ranks = [subprocess.Popen([*argv, "--rank", str(r)], env=env) for r in range(args.ranks)]
        sys.exit(max(r.wait() for r in ranks))
    elif args.launch == "argv":
        dist.init_process_group("gloo", rank=args.rank, world_size=args.world_size)
        train(args.rank, args)
    elif args.launch == "lightning":
        lightning(args)
    else:
        dist.init_process_group("gloo")
        train(dist.get_rank(), args)


def lightning(args: argparse.Namespace) -> None:
    import lightning.pytorch as pl

    class Tiny(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(64, 64)

        def training_step(self, batch: list[torch.Tensor], index: int) -> torch.Tensor:
            if self.global_rank == args.asleep and index == args.step:
                print(f"[launched] rank {self.global_rank}: injecting sleep at step {index}", flush=True)
                time.sleep(args.seconds)
            time.sleep(0.02)
            return self.layer(batch[0]).pow(2).mean()

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(100_000, 64)), batch_size=8)
    trainer = pl.Trainer(
        accelerator="cpu", devices=args.ranks, strategy="ddp", max_steps=args.steps, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    trainer.fit(Tiny(), data)


if __name__ == "__main__":
    main()
