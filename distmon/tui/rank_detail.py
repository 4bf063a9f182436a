"""One rank in full: where it is stuck, its collectives, its trends, its workers, its last
exception. Opened with enter on a rank's line; escape goes back."""

from __future__ import annotations

import math
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Label, Sparkline, Static

from distmon import wire
from distmon.guards.text import visible
from distmon.monitor.state import RankState
from distmon.monitor.state.whereabouts import short_path
from distmon.monitor.state.words import group_name, in_flight, pace_words, timeout_left
from distmon.tui import cells
from distmon.wire import Loader, StackFrame

TRENDS = (
    ("step_time", "step time", cells.short_duration),
    ("waiting", "waits for peers", cells.percent),
    ("gpu", "GPU allocated", cells.short_size),
    ("rss", "host RSS", cells.short_size),
)


def frames(stack: list[StackFrame]) -> Text:
    out = Text()
    for f in stack:
        out.append(f"\n  {visible(short_path(f.file))}:{f.line} ", style="dim")
        out.append(f"in {visible(f.func)}", style="bold")
        if f.code:
            out.append(f"\n      {visible(f.code)}")
    return out


def title_line(rank: RankState, now: float, culprit: bool, told: str | None = None) -> Text:
    """Its status in the words of its row (``told``: the story's, where it has some)."""
    r = rank.report
    line = Text(no_wrap=True, overflow="ellipsis")
    word = told or rank.status(now)
    line.append(f" rank {r.rank} ", style="bold reverse")
    line.append(f" {word}", style="bold")
    if culprit:
        line.append("  culprit", style="bold red")
    line.append(f"  {visible(r.host)} · local rank {r.local_rank} · pid {r.pid}")
    counted = "found, not hooked" if r.outside is not None else f"step {r.steps}"
    line.append(f" · {counted} · heard {cells.short_duration(rank.silent_for(now))} ago")
    return line


def pace_section(rank: RankState) -> Text:
    """How long it waits for its peers, and how long it holds them up: the straggler's measure."""
    pace = rank.pace()
    words = pace_words(pace)
    return Text(words[0].upper() + words[1:] + ".", "bold yellow" if pace is not None and pace.holds else "")


def stack_section(rank: RankState, now: float) -> Text:
    r = rank.report
    if r.stack is None and r.outside is not None:
        return Text(f"Not taken from outside: {visible(r.outside.stack_error or 'py-spy found no frame')}", "yellow")
    if r.stack is None:
        # Absence proves nothing: a rank named from outside may not have sent its stack yet.
        floor = cells.short_duration(wire.STALL_FLOOR)
        return Text(f"None reported: a rank sends its stack once it has made no progress for {floor} or more.", "dim")
    out = Text()
    if r.stalled_since is not None:
        out.append(f"No progress for {cells.short_duration(r.t - r.stalled_since)}; ", style="yellow")
    out.append("innermost frame last" + (", taken from outside with py-spy:" if r.outside is not None else ":"))
    return out + frames(r.stack)


def collectives_section(rank: RankState, now: float) -> Text:
    out = Text()
    for g in rank.report.groups:
        out.append(visible(group_name(g.id, g)), style="bold")
        out.append(f" {g.backend}  completed #{g.completed}")
        if in_flight(g):
            age = rank.age(g.since, now) if g.since else None
            ahead = f" (issued up to {g.enqueued})" if g.enqueued > g.completed + 1 else ""
            out.append(f"  in flight: {visible(g.op or '?')} #{g.completed + 1}{ahead}", style="yellow")
            out.append(f" for {cells.short_duration(age)}", style="yellow")
            left = timeout_left(g, age) if age is not None else None
            if left is not None:
                out.append(f", timeout in {cells.short_duration(left)}", style="yellow")
        out.append("\n")
    for c in rank.report.p2p:
        toward = "to" if c.dir == wire.SEND else "from"
        peer = "any rank" if c.peer == wire.ANY_SOURCE else f"rank {c.peer}"
        out.append(f"{c.dir} {toward} {peer}", style="bold")
        out.append(f" in group {c.group}  {c.completed} of {c.posted} done")
        if c.blocked is not None and c.blocked_since is not None:
            age = rank.age(c.blocked_since, now)
            out.append(f"  blocked in #{c.blocked} for {cells.short_duration(age)}", style="yellow")
        out.append("\n")
    out.rstrip()
    if not out and rank.report.outside is not None:
        return Text("Found without the hook: its groups and sequence numbers are not seen from outside.", "dim")
    return out or Text("No process group reported.", "dim")


def workers_section(rank: RankState) -> Text:
    out = Text()
    for loader in rank.report.loaders:
        alive = sum(w.alive for w in loader.workers)
        out.append(f"DataLoader {loader.id}: {alive}/{loader.expected} alive\n", style="bold")
        for w in loader.workers:
            if w.alive:
                out.append(f"  pid {w.pid}  alive  {cells.short_size(w.rss)}\n")
            else:
                how = w.signal or f"exit code {w.exitcode}"
                out.append(f"  pid {w.pid}  dead ({how})\n", style="bold red")
        if loader.waiting is not None:
            out.append_text(owed_batch(rank, loader))
    out.rstrip()
    return out or Text("No multi-process DataLoader.", "dim")


def owed_batch(rank: RankState, loader: Loader) -> Text:
    """The batch the training loop waits for, the worker that owes it, and where that worker is."""
    waited = f" for {cells.short_duration(rank.report.t - loader.since)}" if loader.since else ""
    out = Text(f"  the training loop waits{waited} for batch #{loader.waiting}", style="yellow")
    worker = next((w for w in loader.workers if w.id is not None and w.id == loader.worker), None)
    if worker is None:
        return out + Text("\n")
    out.append(f", owed by worker {worker.id} (pid {worker.pid})", style="yellow")
    if worker.stack:
        out.append(f"\n  worker {worker.id}, innermost frame last:")
        out.append_text(frames(worker.stack))
    elif worker.stack_error:
        out.append(f"\n  its stack could not be taken: {visible(worker.stack_error)}", style="dim")
    return out + Text("\n")


def exception_section(rank: RankState) -> Text:
    e = rank.report.exception
    if e is None:
        return Text("None.", "dim")
    out = Text()
    out.append(f"{e.type}: ", style="bold red")
    out.append(f"{e.message}\n")
    if e.where is not None:
        where = f"{short_path(e.where.file)}:{e.where.line} in {e.where.func}"
        out.append(f"raised at {where}", style="dim")
    return out + frames(e.traceback)


class RankDetail(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "app.pop_screen", "Back"),
        Binding("question_mark", "app.help", "Help", key_display="?"),
        Binding("q", "app.quit", "Quit"),
    ]

    SECTIONS = (
        ("stack", "Stack"),
        ("collectives", "Collectives and sends"),
        ("pace", "Pace"),
        ("workers", "DataLoader workers"),
        ("exception", "Last exception"),
    )

    def __init__(self, rank: int) -> None:
        super().__init__()
        self.rank = rank
        # The widgets are held, not queried: the app redraws on a timer, which can come
        # before they are mounted or while they are being removed at exit.
        self.heading = Static(id="detail-heading")
        self.trends = {
            metric: (Label(title, id=f"trend-{metric}-label"), Sparkline([], id=f"trend-{metric}"))
            for metric, title, _ in TRENDS
        }
        self.sections = {name: Static(id=f"detail-{name}", classes="section") for name, _ in self.SECTIONS}
        for name, title in self.SECTIONS:
            self.sections[name].border_title = title

    def compose(self) -> ComposeResult:
        yield self.heading
        with VerticalScroll(id="detail-body"):
            with Horizontal(id="trends"):
                for label, sparkline in self.trends.values():
                    with Vertical(classes="trend"):
                        yield label
                        yield sparkline
            yield from self.sections.values()
        yield Footer()

    def show(self, rank: RankState | None, now: float, culprit: bool, told: str | None = None) -> None:
        if rank is None:
            self.heading.update(Text(f" rank {self.rank} has not reported ", style="reverse"))
            return
        self.heading.update(title_line(rank, now, culprit, told))
        for metric, title, fmt in TRENDS:
            values = [v for v in rank.history.series(metric) if not math.isnan(v)]
            label, sparkline = self.trends[metric]
            sparkline.data = values
            label.update(f"{title}  {fmt(values[-1]) if values else '-'}")
        self.sections["pace"].update(pace_section(rank))
        self.sections["stack"].update(stack_section(rank, now))
        self.sections["collectives"].update(collectives_section(rank, now))
        self.sections["workers"].update(workers_section(rank))
        self.sections["exception"].update(exception_section(rank))
