"""The alerts panel: every alert of the run, newest first, coloured by severity."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from distmon.guards.text import visible
from distmon.monitor.state.alerts import CRITICAL, Alert, AlertBook
from distmon.monitor.state.words import time_of_day

SEVERITY_STYLE = {CRITICAL: "bold red", "warning": "yellow"}


def _ranks(ranks: list[int]) -> str:
    if not ranks:
        return ""
    shown = ", ".join(map(str, ranks[:6]))
    return f"rank {shown}{'…' if len(ranks) > 6 else ''}" if len(ranks) == 1 else f"ranks {shown}"


def describe(alert: Alert) -> Text:
    line = Text(no_wrap=True, overflow="ellipsis")
    style = "dim" if alert.resolved is not None else SEVERITY_STYLE.get(alert.severity, "")
    mark = "✓" if alert.resolved is not None else "●"
    line.append(f"{mark} {time_of_day(alert.t)} ", style=style)
    line.append(f"{alert.severity[:4].upper():4} ", style=style)
    line.append(f"{alert.kind}: ", style=style)
    line.append(visible(alert.summary), style="dim" if alert.resolved is not None else "")
    return line


class AlertsPanel(OptionList):
    """Rebuilt only when an alert is raised, changed or resolved."""

    class AlertChosen(Message):
        def __init__(self, alert: Alert) -> None:
            super().__init__()
            self.alert = alert

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.alerts: list[Alert] = []
        self._signature: tuple[object, ...] | None = None
        self.border_title = "Alerts"

    def show(self, book: AlertBook) -> None:
        alerts = sorted(book.history, key=lambda a: (a.resolved is None, a.t), reverse=True)
        signature = tuple((id(a), a.severity, a.summary, a.resolved) for a in alerts)
        if signature == self._signature:
            return
        self._signature = signature
        chosen = self.alerts[self.highlighted] if self.highlighted is not None else None
        self.alerts = alerts
        self.clear_options()
        if alerts:
            self.add_options(Option(describe(a)) for a in alerts)
            self.highlighted = alerts.index(chosen) if chosen in alerts else 0
        else:
            self.add_option(Option(Text("No alerts.", style="dim"), disabled=True))
        active = len(book.active)
        self.border_title = f"Alerts ({active} active)" if active else "Alerts"

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option_index < len(self.alerts):
            self.post_message(self.AlertChosen(self.alerts[event.option_index]))
