"""The two lines at the top: the job, its pace, its state; then the culprit, what the
others wait in and the collective timeout's countdown."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from distmon.guards.text import visible
from distmon.monitor import overview as ov
from distmon.monitor.state import statuses
from distmon.tui import cells

JOB_WIDTH = 24
"""Job ids can be long (a torchrun run id is a UUID); the state and pace come first."""
STATE_STYLE = {
    statuses.WAITING: "reverse",
    statuses.HEALTHY: "bold white on dark_green",
    statuses.STALLED: "bold black on yellow",
    statuses.HUNG: "bold white on red",
    statuses.FAILED: "bold white on red",
    statuses.FINISHED: "bold white on blue",
    statuses.STOPPED: "bold white on dark_red",
}


def headline(o: ov.Overview) -> Text:
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append(f" {o.state.upper()} ", style=STATE_STYLE[o.state])
    if o.state == statuses.WAITING:
        line.append("  No rank has reported yet.")
        if o.dropped:
            line.append(f" Refused: {o.dropped}.", style="yellow")
        return line
    rate = "-" if o.steps_per_second is None else f"{o.steps_per_second:.1f}"
    line.append(f"  {cells.fit(o.job or '', JOB_WIDTH).rstrip()}  ", style="bold")
    if o.found == o.ranks:
        line.append("found, not hooked: seen from outside, no steps counted", style="bold cyan")
    else:
        line.append(f"step {o.steps} · {rate} steps/s")
    line.append(f" · progress {cells.short_duration(o.since_progress)} ago")
    if 0 < o.found < o.ranks:
        line.append(f" · {o.found} found, not hooked", style="cyan")
    line.append(f" · {o.ranks}/{o.world} ranks on {o.hosts} host{'s' * (o.hosts != 1)}")
    if o.dropped:
        line.append(f" · dropped: {o.dropped}", style="yellow")
    if o.unwatched:
        line.append(f" · not watched: {o.unwatched}", style="yellow")
    if o.blind:
        line.append(f" · {visible(o.blind)}", style="yellow")
    return line


def story(o: ov.Overview) -> Text:
    """The second line: the collective timeout's countdown, the culprit in the words its
    row uses (or that no rank is named), and what the others wait in."""
    line = Text(no_wrap=True, overflow="ellipsis")
    c = o.oldest
    if c is not None and c.remaining is not None:
        line.append(" timeout in ", style="bold white on red")
        line.append(f"{cells.short_duration(c.remaining)} ", style="bold white on red")
    line.append(f" {visible(ov.culprit_words(o))}", style="bold")
    if c is None:
        return line
    what = f"{visible(c.op or 'a collective')} #{c.seq} on {visible(c.group)}"
    waiting = o.story.waiting if o.story is not None else 0
    if o.culprits and waiting:
        them = "it" if len(o.culprits) == 1 else "them"
        waits = "1 rank waits" if waiting == 1 else f"{waiting} ranks wait"
        line.append(f" · {waits} for {them} in {what} for {cells.short_duration(c.age)}", style="bold yellow")
    else:
        line.append(f" · {what} in flight for {cells.short_duration(c.age)}", style="bold yellow")
    return line


class JobHeader(Static):
    """One line; a second one, the story, while a collective is stuck or an alert names a
    culprit."""

    def show(self, o: ov.Overview) -> None:
        lines = Text(no_wrap=True, overflow="ellipsis")
        lines.append_text(headline(o))
        if o.oldest is not None or (o.story is not None and o.story.cause is not None):
            lines.append("\n")
            lines.append_text(story(o))
        self.update(lines)
