"""Attaching the hook in the rank processes of an unmodified job, and in no other process.

Runs at start-up in every Python process of a job started by ``distmon run`` (from the
``sitecustomize`` in ``pythonpath/``). Which processes are ranks is decided without the
script's help:

- a process its launcher gave a rank (:data:`RANK_VARIABLES`: torchrun's children, srun
  tasks, mpirun's processes) attaches as soon as the script has imported torch, so a rank
  that stalls before ``init_process_group`` is seen too;
- any other process attaches when ``init_process_group`` returns in it (ranks started by
  ``torch.multiprocessing.spawn``) or at its first optimizer step (a single-process job);
- the launcher (torchrun, accelerate, deepspeed: :data:`LAUNCHERS`) never attaches, and
  neither does any process started by an attached rank (spawned DataLoader workers, helper
  scripts): they inherit ``RANK`` and :data:`MARKER`, and only the rank itself may report as
  that rank.

Nothing happens before the script imports torch: processes that never do pay nothing, and
a script may still set environment variables before ``import torch``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.util
import os
import sys
from collections.abc import Callable, MutableMapping
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

from distmon.node.launchers import LAUNCHERS, entry_point

MARKER = "DISTMON_RANK_PID"
"""Set to the pid of the process that reports as this rank; its descendants stay silent."""

RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
"""Set by torchrun (and accelerate, deepspeed), srun, Open MPI's mpirun, MPICH's mpiexec."""


def install() -> None:
    """Decide for this process and arm the matching trigger. Never raises."""
    try:
        _install(os.environ, sys.orig_argv)
    except Exception as e:
        _say(f"not monitoring this process: {e}")


def _install(env: MutableMapping[str, str], argv: list[str]) -> None:
    if env.get("DISTMON_DISABLE") == "1" or env.get(MARKER, str(os.getpid())) != str(os.getpid()):
        return
    if entry_point(argv) in LAUNCHERS:
        return
    if any(name in env for name in RANK_VARIABLES):
        env[MARKER] = str(os.getpid())
        after_import("torch", _attach)
    else:
        after_import("torch", FirstSign)


def after_import(name: str, callback: Callable[[], Any]) -> None:
    """Call ``callback`` once module ``name`` has been imported completely."""
    if name in sys.modules:
        _quietly(callback)
    else:
        sys.meta_path.insert(0, _AfterImport(name, callback))


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the real loader of one module to run a callback after it."""

    def __init__(self, name: str, callback: Callable[[], Any]) -> None:
        self._name = name
        self._callback = callback

    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname != self._name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        loader = spec.loader if spec is not None else None
        if loader is not None and hasattr(loader, "exec_module"):
            exec_module, callback = loader.exec_module, self._callback

            @functools.wraps(exec_module)
            def exec_then_call(module: ModuleType) -> None:
                exec_module(module)
                _quietly(callback)

            loader.exec_module = exec_then_call  # type: ignore[method-assign]
        return spec


class FirstSign:
    """Attaches at the first sign that this process is a rank after all: ``init_process_group``
    returning, or an optimizer step, whichever comes first."""

    def __init__(self) -> None:
        import torch.distributed as dist
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        self._fired = False
        self._modules: list[Any] = []
        if dist.is_available():
            from torch.distributed import distributed_c10d

            self._modules = [dist, distributed_c10d]
            self._init = original = distributed_c10d.init_process_group

            @functools.wraps(original)
            def init_process_group(*args: Any, **kwargs: Any) -> Any:
                result = original(*args, **kwargs)
                self._fire()
                return result

            for module in self._modules:
                module.init_process_group = init_process_group
        # A pre-hook: the agent registers its step counter as a post-hook, which it could
        # not do while torch iterates over the post-hooks. It stays registered (removing it
        # from inside the iteration is not allowed either) and does nothing once fired.
        register_optimizer_step_pre_hook(self._on_step)

    def _on_step(self, _optimizer: Any, _args: Any, _kwargs: Any) -> None:
        if not self._fired:
            self._fire()

    def _fire(self) -> None:
        if self._fired:
            return
        self._fired = True
        for module in self._modules:
            module.init_process_group = self._init
        _quietly(_attach)


def _attach() -> None:
    import distmon.hooks

    os.environ[MARKER] = str(os.getpid())
    distmon.hooks.attach()


def _quietly(callback: Callable[[], Any]) -> None:
    """Run a step of attaching; a failure costs the monitoring, never the job."""
    try:
        callback()
    except Exception as e:
        _say(f"not monitoring this process: {e}")


def _say(message: str) -> None:
    with contextlib.suppress(Exception):
        print(f"distmon: {message}", file=sys.stderr)
