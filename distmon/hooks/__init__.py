"""The rank side of distmon: ``import distmon.hooks; distmon.hooks.attach(model)``. It imports
torch, the wire (its sockets too) and the small shared modules (the Flight Recorder reader, py-spy's
wrapper, the endpoint, keys, values); never Textual or the watch side.

``attach`` starts a background agent in this process that streams the rank's state to
the monitor (see :mod:`distmon.hooks.agent`). It works before or after
``init_process_group``, with DDP, FSDP, a plain module or no model, in a torchrun rank or
a plain script, and never raises: a monitor problem must not stop training.

Environment: ``DISTMON_ENDPOINT`` (where the monitor listens), ``DISTMON_INTERVAL``
(seconds between reports, default 1), ``DISTMON_JOB_ID`` (overrides the job id derived
from the launcher), ``DISTMON_KEY_FILE`` (the job's key: reports are authenticated and
encrypted, see :mod:`distmon.keys`), ``DISTMON_DISABLE=1`` (attach does nothing),
``DISTMON_STACK_SIGNAL`` (the real-time signal on which faulthandler writes every thread's
stack for a reader that may not trace the rank, default ``SIGRTMIN + 5``; never armed over
a handler the training installed, see :mod:`distmon.hooks.stacksignal`),
``DISTMON_FAULTHANDLER=0`` (not armed).
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from typing import Any

from distmon import endpoint as _endpoint
from distmon import keys as _keys
from distmon.guards import values as _values

DEFAULT_INTERVAL = 1.0
INTERVALS = (0.05, 600.0)
"""The report intervals accepted, in seconds."""

_lock = threading.Lock()
_agent: Any = None
_models: weakref.WeakSet[Any] = weakref.WeakSet()
"""Models whose forward calls are counted, held weakly: a model the script drops is freed."""


def attach(model: Any = None, *, endpoint: str | None = None, interval: float | None = None) -> Any:
    """Start reporting this rank (once per process) and count ``model``'s forward calls. The
    calling thread is taken for the one that trains (its stack is the rank's), unless another
    is seen stepping the optimizer: call it from the training function, wherever that runs.

    Returns the agent, or None when disabled or when it could not start.
    """
    global _agent
    if os.environ.get("DISTMON_DISABLE") == "1":
        return None
    try:
        from distmon.hooks.agent import Agent
        from distmon.hooks.progress import count_forwards

        with _lock:
            if _agent is None:
                period = _interval(interval)
                _agent = Agent(_endpoint.resolve(endpoint), period, _keys.load_for(None))
                _agent.start()
            else:
                _agent.training.claim()
            if model is not None and model not in _models:
                count_forwards(model, _agent.progress)
                _models.add(model)
            return _agent
    except Exception as e:
        print(f"distmon: not monitoring this rank: {e}", file=sys.stderr)
        return None


def _interval(given: float | None) -> float:
    """The report interval: ``given``, else ``DISTMON_INTERVAL``, else the default; a value out
    of range is said in one line and replaced by the default, never raised."""
    if given is None:
        return _values.from_environment("DISTMON_INTERVAL", DEFAULT_INTERVAL, *INTERVALS)
    return _values.from_environment("interval", DEFAULT_INTERVAL, *INTERVALS, env={"interval": str(given)})


def detach() -> None:
    """Stop reporting: sends a final report, removes every hook. Safe to call twice."""
    global _agent
    from distmon.hooks.progress import uncount_forwards

    with _lock:
        agent, _agent = _agent, None
        for model in list(_models):
            uncount_forwards(model)
        _models.clear()
    if agent is not None:
        agent.stop()
