"""distmon for PyTorch Lightning: one callback, every rank monitored.

    from distmon.integrations.lightning import DistmonCallback
    trainer = Trainer(strategy="ddp", devices=4, callbacks=[DistmonCallback()])

It attaches distmon's hook in each rank once Lightning has set up the process group, and
counts the LightningModule's forward calls; optimizer steps are counted whatever Lightning's
loop does (accumulation, manual optimization). Ranks report to ``$DISTMON_ENDPOINT``; watch them with
``distmon watch`` or record them with ``distmon record``. Without code changes,
``distmon run -- python train.py`` does the same.
"""

from __future__ import annotations

from typing import Any

try:
    from lightning.pytorch import Callback
except ImportError:  # the standalone pytorch_lightning package
    from pytorch_lightning import Callback

import distmon.hooks


class DistmonCallback(Callback):
    def __init__(self, endpoint: str | None = None, interval: float | None = None) -> None:
        self.endpoint = endpoint
        self.interval = interval

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        distmon.hooks.attach(pl_module, endpoint=self.endpoint, interval=self.interval)
