"""The two lines at the top: the job, its pace, its state, and the collective timeout's
countdown while a collective is stuck."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from distmon.monitor import overview as ov
from distmon.tui import text
from distmon.visible import visible

JOB_WIDTH = 24
"""Job ids can be long (a torchrun run id is a UUID); the state and pace come first."""
STATE_STYLE = {
    ov.WAITING: "reverse",
    ov.HEALTHY: "bold white on dark_green",
    ov.STALLED: "bold black on yellow",
    ov.HUNG: "bold white on red",
    ov.FAILED: "bold white on red",
    ov.FINISHED: "bold white on blue",
    ov.STOPPED: "bold white on dark_red",
}


def headline(o: ov.Overview) -> Text:
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append(f" {o.state.upper()} ", style=STATE_STYLE[o.state])
    if o.state == ov.WAITING:
        line.append("  No rank has reported yet.")
        if o.dropped:
            line.append(f" Refused: {o.dropped}.", style="yellow")
        return line
    rate = "-" if o.steps_per_second is None else f"{o.steps_per_second:.1f}"
    line.append(f"  {text.fit(o.job or '', JOB_WIDTH).rstrip()}  ", style="bold")
    line.append(f"step {o.steps} · {rate} steps/s")
    line.append(f" · progress {text.duration(o.since_progress)} ago")
    line.append(f" · {o.ranks}/{o.world} ranks on {o.hosts} host{'s' * (o.hosts != 1)}")
    if o.dropped:
        line.append(f" · dropped: {o.dropped}", style="yellow")
    return line


def countdown(c: ov.Collective) -> Text:
    line = Text(no_wrap=True, overflow="ellipsis")
    if c.remaining is not None:
        line.append(" timeout in ", style="bold white on red")
        line.append(f"{text.duration(c.remaining)} ", style="bold white on red")
    op = visible(c.op or "a collective")
    line.append(
        f" {op} seq {c.seq} on {visible(c.group)} in flight for {text.duration(c.age)} (rank {c.rank})",
        style="bold yellow",
    )
    return line


class JobHeader(Static):
    """One line; a second one, the countdown, while a collective is stuck."""

    def show(self, o: ov.Overview) -> None:
        lines = Text(no_wrap=True, overflow="ellipsis")
        lines.append_text(headline(o))
        if o.oldest is not None:
            lines.append("\n")
            lines.append_text(countdown(o.oldest))
        self.update(lines)
