"""distmon for the Hugging Face ``transformers`` Trainer: one callback, every rank monitored.

    from distmon.integrations.transformers import DistmonCallback
    trainer = Trainer(model=model, args=args, train_dataset=data, callbacks=[DistmonCallback()])

When training begins it attaches distmon's hook in each rank (launch with torchrun or accelerate
as usual) and counts the model's forward calls; optimizer steps are counted by the hook.
Ranks report to ``$DISTMON_ENDPOINT``. Without code changes,
``distmon run -- torchrun ... train.py`` does the same.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

import distmon.hooks


class DistmonCallback(TrainerCallback):
    def __init__(self, endpoint: str | None = None, interval: float | None = None) -> None:
        self.endpoint = endpoint
        self.interval = interval

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        distmon.hooks.attach(model, endpoint=self.endpoint, interval=self.interval)
