"""The callbacks in :mod:`distmon.integrations`, each imported from the package and run
against the real framework on CPU. The launch examples in ``hooks/``:
tests/unit/test_launch_examples.py."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.commands import TORCHRUN
from tests.support.listener import Listener
from tests.support.waiting import wait_until

# Each script ends its process group, as torch asks of every script: without it, a gloo rank that
# trained well may abort as its interpreter ends (SIGABRT, "terminate called without an active
# exception", pytorch/pytorch#190489), as one did in a fresh-clone CI run, its Trainer's steps done.
LIGHTNING_SCRIPT = """
    import torch
    import lightning.pytorch as pl
    from distmon.integrations.lightning import DistmonCallback

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def forward(self, x):
            return self.layer(x)

        def training_step(self, batch, _):
            (x,) = batch
            return self(x).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    if __name__ == "__main__":
        data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(256, 4)), batch_size=8)
        trainer = pl.Trainer(
            accelerator="cpu", devices=2, strategy="ddp", max_steps=5, callbacks=[DistmonCallback()],
            logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        )
        trainer.fit(Tiny(), data)
        if torch.distributed.is_initialized():  # see above
            torch.distributed.destroy_process_group()
"""

TRANSFORMERS_SCRIPT = """
    import torch
    from transformers import Trainer, TrainingArguments
    from distmon.integrations.transformers import DistmonCallback

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def forward(self, x, labels):
            return {"loss": torch.nn.functional.mse_loss(self.layer(x), labels)}

    data = [{"x": torch.randn(4), "labels": torch.randn(1)} for _ in range(256)]
    args = TrainingArguments(
        output_dir="out", max_steps=5, per_device_train_batch_size=8, use_cpu=True, ddp_backend="gloo",
        report_to=[], save_strategy="no", logging_strategy="no", disable_tqdm=True,
    )
    Trainer(model=Tiny(), args=args, train_dataset=data, callbacks=[DistmonCallback()]).train()
    torch.distributed.destroy_process_group()  # see above
"""


def run_script(tmp_path: Path, source: str, launcher: list[str], endpoint: str) -> subprocess.CompletedProcess:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(source))
    env = {
        **os.environ,
        "DISTMON_ENDPOINT": endpoint,
        "DISTMON_INTERVAL": "0.5",
        "OMP_NUM_THREADS": "1",
    }
    return subprocess.run([*launcher, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def steps_by_rank(listener: Listener) -> dict[int, int]:
    """The most steps each rank reported, once every rank's exit report (which counts them all) is in."""
    wait_until(lambda: exited(listener) >= reported(listener), 30, "every rank's exit report")
    steps: dict[int, int] = {}
    for report in listener.snapshot():
        steps[report.rank] = max(steps.get(report.rank, 0), report.steps)
    return steps


def reported(listener: Listener) -> set[int]:
    return {report.rank for report in listener.snapshot()}


def exited(listener: Listener) -> set[int]:
    return {report.rank for report in listener.snapshot() if report.exit is not None}


def forwards_by_rank(listener: Listener) -> dict[int, int]:
    forwards: dict[int, int] = {}
    for report in listener.snapshot():
        forwards[report.rank] = max(forwards.get(report.rank, 0), report.forwards)
    return forwards


@pytest.mark.skipif(importlib.util.find_spec("lightning") is None, reason="lightning is not installed")
def test_lightning_callback_reports_both_ddp_ranks(tmp_path: Path, listener: Listener) -> None:
    done = run_script(tmp_path, LIGHTNING_SCRIPT, [sys.executable], listener.endpoint)
    assert done.returncode == 0, done.stderr[-3000:]
    assert steps_by_rank(listener) == {0: 5, 1: 5}
    assert forwards_by_rank(listener) == {0: 5, 1: 5}


@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or importlib.util.find_spec("accelerate") is None,
    reason="transformers[torch] (transformers and accelerate) is not installed",
)
def test_transformers_callback_reports_both_torchrun_ranks(tmp_path: Path, listener: Listener) -> None:
    launcher = [TORCHRUN, "--standalone", "--nproc_per_node=2"]
    done = run_script(tmp_path, TRANSFORMERS_SCRIPT, launcher, listener.endpoint)
    assert done.returncode == 0, done.stderr[-3000:]
    assert steps_by_rank(listener) == {0: 5, 1: 5}
