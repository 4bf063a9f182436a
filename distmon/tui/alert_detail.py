"""An alert's evidence: what the detector saw, in full. Opened by choosing an alert."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from distmon.guards.text import MAX_LINE, visible, visible_lines
from distmon.monitor.state.alerts import Alert
from distmon.monitor.state.words import time_of_day
from distmon.tui.alerts_panel import SEVERITY_STYLE


def alert_evidence(alert: Alert) -> Text:
    out = Text()
    out.append(f"{alert.severity.upper()} {alert.kind}\n", style=SEVERITY_STYLE.get(alert.severity))
    out.append(f"{visible(alert.summary, MAX_LINE)}\n\n", style="bold")
    when = f"raised {time_of_day(alert.t)}"
    if alert.resolved is not None:
        when += f", resolved {time_of_day(alert.resolved)}"
    out.append(f"{when} · ranks {', '.join(map(str, alert.ranks)) or '-'}\n\n", style="dim")
    out.append(visible_lines(alert.detail))
    return out


class AlertDetail(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "app.pop_screen", "Back"),
        Binding("enter", "open_rank", "First rank's details"),
    ]

    def __init__(self, alert: Alert) -> None:
        super().__init__()
        self.alert = alert

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="alert-box"):
            yield Static(alert_evidence(self.alert))
        yield Footer()

    class RankWanted(Message):
        """Show this rank's details (the alert's first)."""

        def __init__(self, rank: int) -> None:
            super().__init__()
            self.rank = rank

    def action_open_rank(self) -> None:
        if self.alert.ranks:
            self.app.pop_screen()
            self.app.post_message(self.RankWanted(self.alert.ranks[0]))
