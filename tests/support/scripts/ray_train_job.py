"""A real Ray Train job (``TorchTrainer``, CPU workers on gloo) with distmon attached in the
training function, as docs/deployment.md shows it; one worker may misbehave at one step.

    python ray_train_job.py [--fault sleep|stop|raise] [--rank 2] [--step 40] [--steps 60] [--no-distmon]

Needs ``ray[train]``. Prints ``done`` when the trainer returns.
"""

from __future__ import annotations

import argparse
import os
import signal
import time

import ray
import torch
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer, prepare_model

import distmon.hooks


def train_func(config: dict) -> None:
    model = prepare_model(torch.nn.Linear(32, 1))
    if config["distmon"]:
        distmon.hooks.attach(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    rank = ray.train.get_context().get_world_rank()
    for step in range(config["steps"]):
        if config["fault"] != "none" and rank == config["rank"] and step == config["step"]:
            misbehave(config["fault"], rank, step)
        loss = model(torch.randn(16, 32)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()  # DDP's all_reduce: the collective the others wait in
        optimizer.step()
        time.sleep(0.05)


def misbehave(fault: str, rank: int, step: int) -> None:
    print(f"[ray-job] rank {rank}: injecting {fault} at step {step}, t={time.time():.3f}", flush=True)
    if fault == "sleep":
        time.sleep(600)
    elif fault == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif fault == "raise":
        raise RuntimeError(f"bad batch at step {step}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--fault", choices=("none", "sleep", "stop", "raise"), default="none")
    p.add_argument("--rank", type=int, default=2)
    p.add_argument("--step", type=int, default=40)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--name", default=None, help="the run's name (RunConfig(name=...))")
    p.add_argument("--no-distmon", dest="distmon", action="store_false", help="no hook: a job found from outside")
    args = p.parse_args()
    ray.init(num_cpus=4, include_dashboard=False)
    trainer = TorchTrainer(
        train_func,
        train_loop_config=vars(args),
        scaling_config=ScalingConfig(num_workers=4, use_gpu=False),
        run_config=RunConfig(name=args.name, storage_path=os.environ.get("RAY_JOB_STORAGE", "/tmp/ray-results")),
    )
    try:
        trainer.fit()
    finally:
        print("done", flush=True)


if __name__ == "__main__":
    main()
