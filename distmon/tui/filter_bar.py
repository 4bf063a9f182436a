"""The ``/`` line: narrows the rank table as you type; escape clears it, enter keeps it."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input


class FilterBar(Input):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "clear_filter", "Clear filter")]

    class QueryChanged(Message):
        def __init__(self, query: str) -> None:
            super().__init__()
            self.query = query

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(placeholder="filter: rank 12, range 8-15, host, or status (stalled)", id=id)
        self.cursor_blink = False

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.post_message(self.QueryChanged(event.value))

    class Done(Message):
        """The filter is set or cleared: the table gets the keys back."""

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.display = bool(self.value)
        self.post_message(self.Done())

    def action_clear_filter(self) -> None:
        self.value = ""
        self.display = False
        self.post_message(self.Done())
