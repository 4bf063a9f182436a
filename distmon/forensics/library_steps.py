"""A failure raised inside a step a library takes alike in every rank: torch.compile compiling the model (the
same code, the same compiler), DistributedDataParallel checking the model and its arguments as it is built or
used (the same model, the same arguments), a distributed checkpoint planning its load or save (the same
checkpoint, the same model). What breaks there breaks alike, and is not a rank's fault."""

from __future__ import annotations

from distmon.forensics.failures import GPU_OWN, PROGRAM_WHY, alone_said, failed_whole_or_cut
from distmon.forensics.logfacts import LogFacts
from distmon.monitor.state.words import rank_word
from distmon.wire.schema import StackFrame

COMPILED = (
    "every rank compiles the same model with the same compiler, so the compilation fails alike on each: the "
    "program, its torch version or the compiler's set-up (a C++ compiler, Triton; TORCHDYNAMO_VERBOSE=1 says "
    "more), not a rank; torch.compile's error is the place to look"
)
_COMPILING = ("torch/_dynamo/convert_frame.py", "torch/_inductor/cpp_builder.py")
"""Files only compilation runs: Dynamo converting a frame it has no compiled code for (a frame whose code is
compiled already runs without it), Inductor building its C++. A compiled model's run passes neither."""
_DDP = "torch/nn/parallel/distributed.py"
_DDP_CHECK = "_log_and_throw"
"""Where DistributedDataParallel raises its own checks: a parameter it cannot use, devices it cannot place, a
hook or a static graph it cannot follow."""

PLANNED = (
    "every rank plans against the same checkpoint with the same model, so the plan fails alike on each (DCP "
    "gathers each rank's error and raises them all on every rank): the checkpoint's path or metadata, or a key "
    "or shape it lacks for the model as configured, not a rank"
)
_PLANNING = ("torch/distributed/checkpoint/state_dict_loader.py", "torch/distributed/checkpoint/state_dict_saver.py")
_PLAN_STEPS = frozenset({"local_step", "global_step"})
"""Where a distributed checkpoint plans: each rank's plan (``local_step``) and the coordinator's (``global_step``),
run inside DCP's own gathers, for a load and for a save."""


def in_library_step(log: LogFacts) -> str | None:
    """Where every failure the log shows was raised in one such step (whole or cut before its exception line),
    none of them a GPU's own, and the log shows no rank apart from them."""
    failed = failed_whole_or_cut(log)
    if not failed or any(GPU_OWN.search(r.said) for r in failed):
        return None
    compiling = all(_compiling(r.frames) for r in failed)
    planning = all(_planning(r.frames) for r in failed)
    if not compiling and not planning and not all(_checked_by_ddp(r.frames) for r in failed):
        return None
    if (alone := alone_said(log, failed, step=True)) is None:
        return None
    who, said = alone
    if planning:
        step = next(f for f in failed[0].frames if _plan_step(f))
        what = "load" if step.file.endswith("loader.py") else "save"
        owners = sorted({r.reported for r in failed if r.reported is not None})
        whose = f"{rank_word(owners)}'s plan, as its CheckpointException says; " if owners else ""
        return f"{who} failed as a distributed checkpoint planned its {what} ({step.func}, {whose}{said}): {PLANNED}"
    if not compiling:
        return f"{who} failed DistributedDataParallel's own check of the model or its arguments ({said}): {PROGRAM_WHY}"
    frame = next(f for f in reversed(failed[0].frames) if f.file.endswith(_COMPILING))
    where = f"{frame.func} in {frame.file.rsplit('/', 1)[-1]}"
    return f"{who} failed while torch.compile compiled ({where}: {said}): {COMPILED}"


def _compiling(frames: list[StackFrame]) -> bool:
    return any(f.file.endswith(_COMPILING) for f in frames)


def _planning(frames: list[StackFrame]) -> bool:
    return any(_plan_step(f) for f in frames)


def _plan_step(frame: StackFrame) -> bool:
    return frame.file.endswith(_PLANNING) and frame.func in _PLAN_STEPS


def _checked_by_ddp(frames: list[StackFrame]) -> bool:
    """The innermost frame is DDP raising its own check."""
    return bool(frames) and frames[-1].file.endswith(_DDP) and frames[-1].func == _DDP_CHECK
