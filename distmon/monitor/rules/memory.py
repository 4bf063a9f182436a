"""``memory_pressure`` (GPU memory near its limit, or memory growing step over step) and
``gpu_fault`` (NVML's Xid and ECC errors, hardware throttling)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import numpy.typing as npt

from distmon import wire
from distmon.monitor.rules.base import Context
from distmon.monitor.state import JobState, RankState
from distmon.monitor.state.alerts import CRITICAL, WARNING, Finding
from distmon.monitor.state.columns import HISTORY
from distmon.monitor.state.kinds import AlertKind
from distmon.monitor.state.words import duration, size


def memory_pressure(job: JobState, ctx: Context) -> list[Finding]:
    running = job.cols.present & ~job.flagged(wire.FLAG_EXITED)
    with np.errstate(invalid="ignore", divide="ignore"):
        full = running & (job.gpu_used() / job.cols.gpu_total >= ctx.limits.memory_near_limit)
    findings = [f for s in job.views(full) for f in _near_limit(s, ctx)]
    # a leak is memory kept step over step: a rank found from outside counts no steps, and its
    # start-up (torch's import, the model built) is memory growing for good reason
    stepping = running & ~job.found()
    for metric in ("gpu", "rss"):
        findings += [f for s in job.views(stepping & _grown(job, metric, ctx)) for f in _growth(s, metric, ctx)]
    return findings


def _grown(job: JobState, metric: str, ctx: Context) -> npt.NDArray[np.bool_]:
    """Per rank: ``metric`` grew over the window by the margin (the candidates for
    :func:`_growth`, which also asks that it rose at nearly every report)."""
    c, window = job.cols, ctx.limits.growth_window
    ring = c.history[metric]
    newest = ring[(c.history_next - 1) % HISTORY, np.arange(c.capacity)]
    oldest = ring[(c.history_next - 1 - window) % HISTORY, np.arange(c.capacity)]
    oldest = np.where(c.history_count > window, oldest, np.nan)
    with np.errstate(invalid="ignore"):
        grown: npt.NDArray[np.bool_] = newest - oldest >= np.maximum(
            ctx.limits.growth_min_bytes, ctx.limits.growth_min_ratio * oldest
        )
    return grown


def _near_limit(s: RankState, ctx: Context) -> list[Finding]:
    gpu, used, total = s.report.gpu, s.gpu_used(), s.gpu_total()
    if gpu is None or used is None or total is None:
        return []
    share = used / total
    if share < ctx.limits.memory_near_limit:
        return []
    r = s.report
    summary = f"rank {r.rank}: GPU {gpu.index} memory {share:.0%} full ({size(used)} of {size(total)})"
    detail = "\n".join(
        [
            f"rank {r.rank} ({r.host}) GPU {gpu.index}: {size(used)} used of {size(total)}; "
            f"torch allocated {size(gpu.allocated or 0)}, reserved {size(gpu.reserved or 0)}, "
            f"peak {size(gpu.peak or 0)}.",
            "The next larger batch or activation will raise CUDA out of memory on this rank.",
            "What to do: lower the batch size or sequence length, enable activation checkpointing, "
            "or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True if reserved far exceeds allocated.",
        ]
    )
    return [
        Finding(
            f"memory_pressure:{r.rank}:gpu_full",
            AlertKind.MEMORY_PRESSURE,
            WARNING,
            [r.rank],
            summary,
            detail,
        )
    ]


def _growth(s: RankState, metric: str, ctx: Context) -> list[Finding]:
    """Memory that rose at nearly every report over the window, by a margin."""
    window = ctx.limits.growth_window
    history = s.history
    newest, oldest = history.latest(metric), history.latest(metric, window)
    if math.isnan(newest) or math.isnan(oldest):
        return []
    grown = newest - oldest
    if grown < max(ctx.limits.growth_min_bytes, ctx.limits.growth_min_ratio * oldest):
        return []
    values = history.series(metric, window + 1)
    rises = sum(b > a for a, b in itertools.pairwise(values))
    if rises < 0.8 * window:
        return []
    span = history.latest("t") - history.latest("t", window)
    rate = grown / span if span > 0 else 0.0
    r = s.report
    if metric == "gpu":
        where, limit = f"GPU {r.gpu.index if r.gpu else '?'} memory", _gpu_headroom(s)
    else:
        where, limit = "host RSS", r.memory.host_available if r.memory else None
    eta = f"; at this rate the limit is reached in {duration(limit / rate)}" if limit and rate > 0 else ""
    summary = f"rank {r.rank}: {where} grew {size(grown)} in {duration(span)} (+{size(rate)}/s){eta}"
    detail = "\n".join(
        [
            f"rank {r.rank} ({r.host}, pid {r.pid}): {where} rose at {rises} of the last {window} "
            f"reports, from {size(oldest)} to {size(newest)} (+{size(rate)}/s){eta}.",
            "Memory that grows step over step is a leak: tensors kept across steps (a list of "
            "losses without .item() or .detach(), a growing cache, a history of outputs).",
            "What to do: look for state kept across iterations on this rank; "
            "torch.cuda.memory_snapshot() or tracemalloc show what is allocated.",
        ]
    )
    return [
        Finding(
            f"memory_pressure:{r.rank}:{metric}",
            AlertKind.MEMORY_PRESSURE,
            WARNING,
            [r.rank],
            summary,
            detail,
        )
    ]


def _gpu_headroom(s: RankState) -> float | None:
    used, total = s.gpu_used(), s.gpu_total()
    return None if used is None or total is None else total - used


def gpu_fault(job: JobState, ctx: Context) -> list[Finding]:
    findings = []
    for s in job.views(job.flagged(wire.FLAG_GPU_FAULT)):
        gpu, r = s.report.gpu, s.report
        if gpu is None:
            continue
        errors = []
        if gpu.xid:
            errors.append(f"Xid {gpu.xid}")
        if gpu.ecc:
            errors.append(f"{gpu.ecc} uncorrected ECC errors")
        throttled = sorted(set(gpu.throttle or []) & wire.HARDWARE_THROTTLE)
        if not errors and not throttled:
            continue
        problem = ", ".join(errors + [f"throttled ({', '.join(throttled)})"] * bool(throttled))
        summary = f"rank {r.rank}: GPU {gpu.index} on {r.host}: {problem}"
        detail = "\n".join(
            [
                f"NVML reports for rank {r.rank}'s GPU {gpu.index} on {r.host}: {problem}; "
                f"temperature {gpu.temp if gpu.temp is not None else '?'} C, "
                f"power {gpu.power if gpu.power is not None else '?'} W.",
                "What to do: Xid and ECC errors mean the device is failing: drain the node and "
                "restart from the last checkpoint elsewhere (see `nvidia-smi -q`, dmesg for NVRM "
                "Xid). Hardware throttling slows this rank and so the whole job: check cooling and power.",
            ]
        )
        severity = CRITICAL if errors else WARNING
        findings.append(Finding(f"gpu_fault:{r.rank}", AlertKind.GPU_FAULT, severity, [r.rank], summary, detail))
    return findings
