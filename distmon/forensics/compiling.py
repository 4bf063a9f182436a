"""A failure raised while torch.compile compiled the model: every rank compiles the same code with the same
compiler, so what breaks there breaks alike, and is not a rank's fault."""

from __future__ import annotations

import re

from distmon.forensics.failures import shown_apart
from distmon.forensics.logfacts import LogFacts
from distmon.forensics.tracebacks import Raised
from distmon.monitor.state.words import rank_word

COMPILED = (
    "every rank compiles the same model with the same compiler, so the compilation fails alike on each: the "
    "program, its torch version or the compiler's set-up (a C++ compiler, Triton; TORCHDYNAMO_VERBOSE=1 says "
    "more), not a rank; torch.compile's error is the place to look"
)
_COMPILING = ("torch/_dynamo/convert_frame.py", "torch/_inductor/cpp_builder.py")
"""Files only compilation runs: Dynamo converting a frame it has no compiled code for (a frame whose code is
compiled already runs without it), Inductor building its C++. A compiled model's run passes neither."""
_OWN = re.compile(r"out of memory|ECC error|\bXid\b|illegal memory access", re.IGNORECASE)
"""A failure a rank may meet alone while compiling: its GPU's memory or its GPU itself."""


def compile_failed(log: LogFacts) -> str | None:
    """Where every failure the log shows was raised while torch.compile compiled (whole or cut before its
    exception line), none of them a GPU's own, and the log shows no rank apart from them."""
    failed = [r for r in log.exceptions if not (r.consequence or r.launcher or r.stopped or r.launchers)]
    if not failed or not all(_compiling(r) and not _OWN.search(r.said) for r in failed):
        return None
    ranks = {rank for rank, r in log.raised.items() if any(r is f for f in failed)}
    if shown_apart(log, ranks) or log.waiting:
        return None
    said = next((f"{r.type}: {r.message[:200]}" for r in failed if not r.cut), "its exception line cut from the log")
    who = rank_word(sorted(ranks)) if ranks else "a process"
    frame = next(f for f in reversed(failed[0].frames) if f.file.endswith(_COMPILING))
    where = f"{frame.func} in {frame.file.rsplit('/', 1)[-1]}"
    return f"{who} failed while torch.compile compiled ({where}: {said}): {COMPILED}"


def _compiling(raised: Raised) -> bool:
    return any(f.file.endswith(_COMPILING) for f in raised.frames)
