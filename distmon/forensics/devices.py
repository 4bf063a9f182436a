"""What the ranks' GPUs refused as each rank set itself up, the same for every rank of that set-up: the
model, moved onto its GPU, did not fit (every rank places the same model, or its equal part); the
process could not take its GPU at all (an index past the GPUs it sees, CUDA started before a fork):
not a rank's fault."""

from __future__ import annotations

import re

from distmon.forensics.failures import alone_said, failed_whole_or_cut, is_own
from distmon.forensics.logfacts import LogFacts
from distmon.monitor.state.words import rank_word
from distmon.wire.schema import StackFrame

TOO_LARGE = (
    "every rank places the same model (or its equal part of it) on its GPU, so the model at this parallelism does "
    "not fit the GPU: the set-up (GPUs with more memory, more ranks to split the model, a lower precision, the "
    "model sharded or offloaded), not a rank"
)
_OOM = re.compile(r"OutOfMemoryError|CUDA out of memory")
_MODULE = "torch/nn/modules/module.py"
_SIZE = r"(\d{1,9}(?:\.\d{1,4})?) ([KMGT])iB"
_TOTAL = re.compile(rf"{_SIZE} total capacity|total capacity of {_SIZE}")
_HELD = re.compile(rf"this process has {_SIZE}|{_SIZE} reserved in total by PyTorch|{_SIZE} already allocated")
_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def model_too_large(log: LogFacts) -> str | None:
    """Where every failure of a rank's own the log shows is CUDA running out of memory as the model was
    moved onto the GPU (``Module.to``/``cuda``: its ``_apply``), and no process was killed. The model is
    what filled the GPU where two processes failed so, or where the message's own figures say the process
    held most of it; a process holding little failed for what another holds there (a stale process, two
    ranks given one GPU), and one process's bare message is that rank's failure, as any rank's error is."""
    own = [r for r in log.exceptions if is_own(r)]
    placing = [r for r in own if _OOM.search(f"{r.type}: {r.said}") and any(_placing(f.file, f.func) for f in r.frames)]
    if not own or len(placing) < len(own) or any(e.killed for e in log.exits) or log.crashes.crashes:
        return None
    shares = [_share_held(r.said) for r in placing]
    if any(s is not None and s < 0.5 for s in shares) or (len(placing) == 1 and shares[0] is None):
        return None
    ranks = sorted(rank for rank, r in log.raised.items() if is_own(r))
    who = rank_word(ranks) if ranks else "a process"
    return f"{who} ran out of GPU memory moving the model onto its GPU ({placing[0].type}): {TOO_LARGE}"


def _share_held(said: str) -> float | None:
    """The share of its GPU that CUDA's out-of-memory message says the process itself held, where it
    gives the GPU's total and the process's own figure (every torch era words them differently)."""
    total = _TOTAL.search(said)
    held = [_bytes(m) for m in _HELD.finditer(said)]
    return max(held) / _bytes(total) if total and held and _bytes(total) else None


def _bytes(match: re.Match[str]) -> float:
    """The first size a match holds (its number and unit prefix), in bytes."""
    number, unit = next((a, b) for a, b in zip(match.groups()[::2], match.groups()[1::2], strict=True) if a)
    return float(number) * _UNITS[unit]


def _placing(file: str, func: str) -> bool:
    """A frame of ``Module._apply``: the model's parameters moved or cast, as ``to``, ``cuda`` and ``half`` do."""
    return file.endswith(_MODULE) and func == "_apply"


NO_GPU = (
    "every rank takes its GPU the same way, so the launch, not a rank: more processes on a node than GPUs it sees "
    "(--nproc-per-node against CUDA_VISIBLE_DEVICES), a GPU index taken from the global rank, not the local one, "
    "CUDA started before the processes were forked (start them with spawn), or a container given no GPU"
)
_CUDA = "torch/cuda/__init__.py"
_TAKING = frozenset({"set_device", "_lazy_init", "current_device"})
"""torch.cuda's functions that choose the process's GPU and start CUDA on it."""
_REFUSED = re.compile(
    r"invalid device ordinal|re-initialize CUDA in forked subprocess|No CUDA GPUs are available"
    r"|not compiled with CUDA|no CUDA-capable device|[Ff]ound no NVIDIA driver|busy or unavailable"
)
"""CUDA's and torch's words on a process that could not take a GPU: none there for it, or CUDA not startable."""


def gpu_not_taken(log: LogFacts) -> str | None:
    """Where every failure the log shows ended in torch.cuda taking the process's GPU, each saying why in the words
    of a process given no GPU it can take (or its exception line cut from the log), and the log shows no rank
    apart from them (waiting, going on, failing otherwise): the launch gave the processes their GPUs."""
    failed = failed_whole_or_cut(log)
    failed += [log.cut_nameless] if log.cut_nameless is not None and not log.exceptions else []
    if not failed or not all(_taking(r.frames) and (r.cut or _REFUSED.search(r.said)) for r in failed):
        return None
    if (alone := alone_said(log, failed)) is None:
        return None
    who, said = alone
    return f"{who} could not take its GPU (in torch.cuda's {failed[0].frames[-1].func}: {said}): {NO_GPU}"


def _taking(frames: list[StackFrame]) -> bool:
    """The innermost frame is torch.cuda taking the process's GPU."""
    return bool(frames) and frames[-1].file.endswith(_CUDA) and frames[-1].func in _TAKING
