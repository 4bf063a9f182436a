"""``distmon report FILE --html OUT``: the post-mortem as one self-contained page.

Plots from plotly (the ``html`` extra), its JavaScript inlined once, so the page opens
offline, attached to a ticket. The page shows the first cause with its evidence, then step
progress per rank, each process group's sequence numbers, memory per rank and the alert
timeline. At most :data:`MAX_RANKS` ranks are drawn: every rank an alert names first, then
an even sample of the others, and the page says which; a band behind the steps shows the
slowest and fastest of *all* ranks, so a sample never hides an outlier's pace.
"""

from __future__ import annotations

import contextlib
import html
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from distmon.monitor.recording.format import BatchRecord, ColumnRecord, MessageRecord
from distmon.monitor.recording.readback import Postmortem
from distmon.monitor.recording.reader import read_recording
from distmon.monitor.state.alerts import CRITICAL, Alert
from distmon.monitor.state.columns import gpu_held
from distmon.monitor.state.ranks import report_gpu_allocated
from distmon.monitor.state.words import count, duration, group_label, rank_word, ranks_text
from distmon.wire import GroupStatus, WireError, decode, name_hash
from distmon.wire.column_batch import ColumnBatch

MAX_RANKS = 32
"""Ranks drawn in the per-rank plots; ranks named by alerts count first."""
MAX_GROUPS = 8
"""Process groups drawn, those with the most sampled members first."""
MAX_POINTS = 1500
"""Points per line; longer series are thinned evenly."""
CULPRIT = "#d62728"
GiB = 1024**3


Figure = Any
"""A ``plotly.graph_objects.Figure``; plotly is imported only when a page is made."""


INSTALL_HTML = "pip install '.[html]' in distmon's checkout"
"""As the README installs extras."""


class MissingPlotly(Exception):
    """plotly is not installed; the message says how to get it."""


@dataclass
class RankSeries:
    t: list[float] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    rss: list[float | None] = field(default_factory=list)
    gpu: list[float | None] = field(default_factory=list)
    groups: dict[str, tuple[list[float], list[int], list[int]]] = field(default_factory=dict)
    """Per group: times, the last sequence number issued, the last completed."""


@dataclass
class Series:
    """What the plots need from a recording: the sampled ranks' series, and the range of
    steps over all ranks, per second."""

    start: float
    ranks: dict[int, RankSeries]
    group_names: dict[str, str]
    step_range: dict[int, tuple[int, int]]


def choose_ranks(pm: Postmortem, limit: int = MAX_RANKS) -> list[int]:
    """The ranks to draw: those alerts name (culprits first), then an even sample of the rest."""
    known = sorted(pm.state.ranks)
    named = list(dict.fromkeys(r for a in _by_importance(pm.alerts) for r in a.ranks if r in pm.state.ranks))
    chosen = named[:limit]
    rest = [r for r in known if r not in set(chosen)]
    room = limit - len(chosen)
    if len(rest) <= room:
        return sorted(chosen + rest)
    if room > 0:
        chosen += [rest[i * len(rest) // room] for i in range(room)]
    return sorted(chosen)


def _by_importance(alerts: list[Alert]) -> list[Alert]:
    return sorted(alerts, key=lambda a: (a.severity != CRITICAL, a.t))


def read_series(path: str, ranks: Iterable[int], start: float) -> Series:
    """Second pass over the recording: the chosen ranks' series as they arrived."""
    wanted = set(ranks)
    series = Series(start, {r: RankSeries() for r in wanted}, {}, {})
    _, records = read_recording(path)
    groups: dict[int, GroupStatus] = {}
    for record in records:
        if isinstance(record, MessageRecord | BatchRecord):
            for frame in record.frames():
                _add(series, frame, record.t)
        elif isinstance(record, ColumnRecord):
            _add_columns(series, record.batch, record.t, groups)
    return series


def _add(series: Series, frame: bytes, received: float) -> None:
    try:
        report = decode(frame)
    except WireError:
        return
    second = int(received - series.start)
    low, high = series.step_range.get(second, (report.steps, report.steps))
    series.step_range[second] = (min(low, report.steps), max(high, report.steps))
    s = series.ranks.get(report.rank)
    if s is None:
        return
    t = received - series.start
    s.t.append(t)
    s.steps.append(report.steps)
    s.rss.append(report.memory.rss if report.memory else None)
    s.gpu.append(report_gpu_allocated(report))
    for g in report.groups:
        series.group_names.setdefault(g.id, group_label(g.id, g.desc))
        times, issued, completed = s.groups.setdefault(g.id, ([], [], []))
        times.append(t)
        issued.append(g.enqueued)
        completed.append(g.completed)


def _add_columns(series: Series, batch: ColumnBatch, received: float, groups: dict[int, GroupStatus]) -> None:
    """A relay's columns: the step range over all its frames, the chosen ranks' numbers, and
    the names of their groups from the reports that came whole (each rank's first did)."""
    h = batch.headers
    if len(h):
        second = int(received - series.start)
        low, high = series.step_range.get(second, (int(h["steps"].min()), int(h["steps"].max())))
        series.step_range[second] = (min(low, int(h["steps"].min())), max(high, int(h["steps"].max())))
    ends = batch.ends.astype(np.int64)
    first_row = np.concatenate([[0], np.cumsum(h["groups"].astype(np.int64))])
    t = received - series.start
    gpu = gpu_held(h["gpu_allocated"], h["gpu_used"])
    for i in np.flatnonzero(np.isin(h["rank"], list(series.ranks))).tolist():
        if ends[i + 1] > ends[i]:
            with contextlib.suppress(WireError):
                groups.update({name_hash(g.id): g for g in decode(batch.reports[ends[i] : ends[i + 1]]).groups})
        s = series.ranks[int(h["rank"][i])]
        s.t.append(t)
        s.steps.append(int(h["steps"][i]))
        s.rss.append(_number(h["rss"][i]))
        s.gpu.append(_number(gpu[i]))
        for row in batch.groups[first_row[i] : first_row[i + 1]]:
            g = groups.get(int(row["id"]))
            if g is None:
                continue
            series.group_names.setdefault(g.id, group_label(g.id, g.desc))
            times, issued, completed = s.groups.setdefault(g.id, ([], [], []))
            times.append(t)
            issued.append(int(row["enqueued"]))
            completed.append(int(row["completed"]))


def _number(value: Any) -> float | None:
    return None if np.isnan(value) else float(value)


def render_page(pm: Postmortem, path: str, text_report: str) -> str:
    """The page for the recording at ``path`` (already loaded as ``pm``)."""
    try:
        import plotly.graph_objects as go
        from plotly.offline import get_plotlyjs
    except ImportError:
        raise MissingPlotly(f"--html needs the html extra (plotly): {INSTALL_HTML}") from None
    start = pm.first or pm.header.get("created", 0.0)
    ranks = choose_ranks(pm)
    series = read_series(path, ranks, start)
    named = {r for a in pm.alerts for r in a.ranks}
    figures = [
        ("Step progress per rank", _steps(go, series, named)),
        *((f"Sequence numbers: {title}", fig) for title, fig in _groups(go, series, named)),
        ("Memory per rank", _memory(go, series, named)),
        ("Alert timeline", _alerts(go, pm, start)),
    ]
    plots = "\n".join(
        f"<h2>{html.escape(title)}</h2>\n"
        + fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False, "responsive": True})
        for title, fig in figures
        if fig is not None
    )
    return PAGE.format(
        title=html.escape(f"distmon post-mortem: {pm.state.job or 'no rank reported'}"),
        plotly=get_plotlyjs(),
        summary=_summary(pm, start),
        cause=_cause(pm, start),
        sample=html.escape(_sample_note(pm, ranks, named, len(series.group_names))),
        plots=plots,
        text=html.escape(text_report),
    )


def _thin(*columns: list[Any]) -> list[list[Any]]:
    n = len(columns[0])
    if n <= MAX_POINTS:
        return list(columns)
    keep = [round(i * (n - 1) / (MAX_POINTS - 1)) for i in range(MAX_POINTS)]
    return [[c[i] for i in keep] for c in columns]


def _line(rank: int, named: set[int]) -> dict[str, Any]:
    return {"width": 3, "color": CULPRIT} if rank in named else {"width": 1}


def _layout(fig: Figure, y_title: str, height: int = 380) -> None:
    fig.update_layout(
        height=height,
        margin={"l": 60, "r": 20, "t": 30, "b": 40},
        xaxis_title="seconds since the recording began",
        yaxis_title=y_title,
        template="plotly_white",
    )


def _steps(go: ModuleType, series: Series, named: set[int]) -> Figure:
    fig = go.Figure()
    if series.step_range:
        seconds = sorted(series.step_range)
        ranges = [series.step_range[t] for t in seconds]
        seconds, low, high = _thin(seconds, [lo for lo, _ in ranges], [hi for _, hi in ranges])
        band = {"mode": "lines", "line": {"width": 0}, "hoverinfo": "skip", "legendgroup": "all"}
        fig.add_trace(go.Scatter(x=seconds, y=low, showlegend=False, **band))
        fig.add_trace(
            go.Scatter(x=seconds, y=high, fill="tonexty", fillcolor="rgba(0,0,0,0.08)", name="all ranks: range", **band)
        )
    for rank, s in _drawing_order(series, named):
        t, steps = _thin(s.t, s.steps)
        fig.add_trace(go.Scatter(x=t, y=steps, mode="lines", name=_rank_name(rank, named), line=_line(rank, named)))
    _layout(fig, "optimizer steps")
    return fig


def _groups(go: ModuleType, series: Series, named: set[int]) -> Iterator[tuple[str, Figure]]:
    members: dict[str, int] = {}
    for s in series.ranks.values():
        for gid in s.groups:
            members[gid] = members.get(gid, 0) + 1
    for gid in sorted(members, key=lambda g: (-members[g], g))[:MAX_GROUPS]:
        fig = go.Figure()
        for rank, s in _drawing_order(series, named):
            if gid not in s.groups:
                continue
            t, issued, completed = _thin(*s.groups[gid])
            name = _rank_name(rank, named)
            fig.add_trace(
                go.Scatter(
                    x=t, y=issued, mode="lines", name=f"{name} issued", legendgroup=name, line=_line(rank, named)
                )
            )
            fig.add_trace(
                go.Scatter(
                    x=t,
                    y=completed,
                    mode="lines",
                    name=f"{name} completed",
                    legendgroup=name,
                    line={**_line(rank, named), "dash": "dot"},
                )
            )
        _layout(fig, "collective sequence number")
        yield series.group_names.get(gid, gid), fig


def _memory(go: ModuleType, series: Series, named: set[int]) -> Figure:
    from plotly.subplots import make_subplots

    has_gpu = any(v is not None for s in series.ranks.values() for v in s.gpu)
    titles = ["host RSS (GiB)", "GPU memory (GiB)"] if has_gpu else ["host RSS (GiB): no rank reported a GPU"]
    fig = make_subplots(rows=1, cols=len(titles), subplot_titles=titles)
    for rank, s in _drawing_order(series, named):
        name = _rank_name(rank, named)
        for col, values in enumerate([s.rss, s.gpu][: len(titles)], start=1):
            t, v = _thin(s.t, [None if x is None else x / GiB for x in values])
            fig.add_trace(
                go.Scatter(
                    x=t, y=v, mode="lines", name=name, legendgroup=name, showlegend=col == 1, line=_line(rank, named)
                ),
                row=1,
                col=col,
            )
    _layout(fig, "GiB")
    return fig


def _alerts(go: ModuleType, pm: Postmortem, start: float) -> Figure | None:
    if not pm.alerts:
        return None
    end = (pm.last or start) - start
    fig = go.Figure()
    for i, a in enumerate(pm.alerts):
        t0 = a.t - start
        t1 = (a.resolved - start) if a.resolved is not None else end
        label = f"{i + 1}. {a.kind} (rank{'s' if len(a.ranks) != 1 else ''} {ranks_text(a.ranks)})"
        fig.add_trace(
            go.Bar(
                x=[max(t1 - t0, 0.5)],
                base=[t0],
                y=[label],
                orientation="h",
                marker_color=CULPRIT if a.severity == CRITICAL else "#ff7f0e",
                name=a.severity,
                showlegend=False,
                hovertext=[f"{a.summary}<br>+{duration(t0)}" + ("" if a.resolved else ", still active at the end")],
                hoverinfo="text",
            )
        )
    _layout(fig, "", height=120 + 40 * len(pm.alerts))
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(range=[0, max(end, 1.0)])
    return fig


def _drawing_order(series: Series, named: set[int]) -> list[tuple[int, RankSeries]]:
    """Named ranks last, so that their red lines lie on top."""
    return sorted(series.ranks.items(), key=lambda item: (item[0] in named, item[0]))


def _rank_name(rank: int, named: set[int]) -> str:
    return f"rank {rank}" + (" (named)" if rank in named else "")


def _summary(pm: Postmortem, start: float) -> str:
    state = pm.state
    span = (pm.last or start) - start
    return html.escape(
        f"{count(state.world, 'rank')} on {count(len(state.hosts), 'host')}, {count(state.received, 'message')}, "
        f"recorded for {duration(span)}, {count(len(pm.alerts), 'alert')}"
    )


def _cause(pm: Postmortem, start: float) -> str:
    cause = pm.first_cause
    if cause is None and pm.alerts:
        return f'<p class="healthy">{html.escape(pm.no_cause())}</p>'
    if cause is None:
        return '<p class="healthy">No alerts: the job looked healthy for the whole recording.</p>'
    return (
        f'<section class="cause {html.escape(cause.severity)}">'
        f"<h2>First cause (+{html.escape(duration(cause.t - start))}): {html.escape(cause.kind)}, "
        f"{html.escape(rank_word(cause.ranks) if cause.ranks else 'no rank behind')}</h2>"
        f"<p>{html.escape(cause.headline)}</p><pre>{html.escape(cause.detail)}</pre></section>"
    )


def _sample_note(pm: Postmortem, ranks: list[int], named: set[int], groups: int) -> str:
    total = len(pm.state.ranks)
    if len(ranks) >= total:
        note = f"All {total} ranks are drawn; ranks named by an alert in red."
    else:
        note = (
            f"Drawn: {len(ranks)} of {total} ranks ({len(named & set(ranks))} named by alerts, in red, and an even "
            f"sample of the others: {ranks_text(ranks)}). The grey band is the range of steps over all {total} "
            f"ranks; every rank is in the recording (distmon replay)."
        )
    if groups > MAX_GROUPS:
        note += f" Sequence numbers: the {MAX_GROUPS} of {groups} process groups with the most drawn ranks."
    return note


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 24px auto; max-width: 1200px; color: #222; }}
h1 {{ font-size: 22px; margin-bottom: 4px; }} h2 {{ font-size: 17px; margin: 28px 0 6px; }}
.summary, .sample {{ color: #555; }}
.cause {{ border-left: 6px solid #ff7f0e; background: #fff7ee; padding: 8px 16px; }}
.cause.critical {{ border-color: {culprit}; background: #fdeeee; }}
.cause h2 {{ margin-top: 6px; }}
pre {{ white-space: pre-wrap; font-size: 13px; }}
details pre {{ background: #f6f6f6; padding: 12px; }}
</style>
<script>{plotly}</script>
</head><body>
<h1>{title}</h1>
<p class="summary">{summary}</p>
{cause}
<p class="sample">{sample}</p>
{plots}
<details><summary>The text report (distmon report)</summary><pre>{text}</pre></details>
</body></html>
""".replace("{culprit}", CULPRIT)
