"""The rank table: one line per rank, thousands of them, drawn with Textual's Line API.

Only the lines on screen are rendered, straight from the monitor's rank states, so a redraw
costs the same for 64 ranks as for 4096. The row order (sort, filter, node groups) is kept
between redraws and rebuilt only when it can have changed: when ranks come or go, when the
user changes it, or once a second for orders that depend on live values.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from distmon.monitor.state import RankState
from distmon.tui import columns, text

GROUP_ABOVE = 64
"""With more ranks than this, the table starts grouped by node."""
RESORT_EVERY = 1.0
"""Seconds of feed time between re-sorts by a live value."""

BADGE = {
    columns.OK: Style(color="green"),
    columns.STALLED: Style(color="yellow", bold=True),
    columns.SILENT: Style(color="magenta", bold=True),
    columns.FAILED: Style(color="bright_white", bgcolor="red", bold=True),
    columns.WORKER: Style(color="red", bold=True),
    columns.EXITED: Style(dim=True),
    columns.STOPPED: Style(color="red"),
}


SortKey = Callable[[RankState, float], float]
SORTS: dict[str, SortKey] = {
    "rank": lambda r, now: r.rank,
    "status": lambda r, now: -columns.SEVERITY[columns.status(r, now)],
    "step": lambda r, now: r.report.steps,
    "step time": lambda r, now: -(r.report.step_time.p50 if r.report.step_time else 0.0),
    "memory": lambda r, now: -(r.gpu_used() or r.rss() or 0.0),
    "data wait": lambda r, now: -(r.report.data_wait or 0.0),
}


@dataclass(frozen=True)
class Row:
    """A line of the table: a rank, or the heading of a node's ranks."""

    rank: int | None = None
    host: str | None = None


def matches(query: str, rank: RankState, now: float) -> bool:
    """Every word of ``query`` matches: a rank (``12``), a range (``8-15``), or part of the
    host name or status word."""
    for word in query.lower().split():
        if word.isdigit():
            if rank.rank != int(word):
                return False
        elif "-" in word and all(p.isdigit() for p in word.split("-", 1)):
            lo, hi = (int(p) for p in word.split("-", 1))
            if not lo <= rank.rank <= hi:
                return False
        elif word not in rank.report.host.lower() and word not in columns.status(rank, now):
            return False
    return True


class RankTable(ScrollView, can_focus=True):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "choose", "Details"),
        Binding("s", "cycle_sort", "Sort"),
        Binding("r", "reverse", "Reverse", show=False),
        Binding("g", "toggle_groups", "Group", show=False),
        Binding("p", "toggle_problems", "Problems", show=False),
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "jump(0)", "First", show=False),
        Binding("end", "jump(-1)", "Last", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "rank-table--header",
        "rank-table--cursor",
        "rank-table--culprit",
        "rank-table--node",
    }

    class RankChosen(Message):
        """Enter on a rank's line."""

        def __init__(self, rank: int) -> None:
            super().__init__()
            self.rank = rank

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ranks: Mapping[int, RankState] = {}
        self.now = 0.0
        self.culprits: frozenset[int] = frozenset()
        self.sort = "rank"
        self.reverse = False
        self.grouped: bool | None = None
        """None: decided by the number of ranks."""
        self.problems_only = False
        self.filter_text = ""
        self.collapsed: set[str] = set()
        self.rows: list[Row] = []
        self.empty_message = ""
        """Shown while no rank has reported."""
        self.cursor = 0
        self._order_stale = True
        self._known: int = -1
        self._sorted_at = -math.inf
        self._members: dict[str, list[int]] = {}
        self._hidden: frozenset[str] = frozenset()
        self._moved = False
        """Whether the user has moved the cursor: from then on it follows its row."""

    # --- state from the app -------------------------------------------------------------

    def show(self, ranks: Mapping[int, RankState], now: float, culprits: frozenset[int]) -> None:
        """Point the table at the latest state; cheap unless the row order must change."""
        self.ranks, self.now = ranks, now
        if culprits != self.culprits:
            self.culprits = culprits
            self._order_stale = True
        if len(ranks) != self._known:
            self._known = len(ranks)
            self._order_stale = True
        live_order = self.sort != "rank" or self.problems_only or bool(self.filter_text)
        if live_order and now - self._sorted_at >= RESORT_EVERY:
            self._order_stale = True
        if self._order_stale:
            self._rebuild()
        self.refresh()

    @property
    def is_grouped(self) -> bool:
        return self.grouped if self.grouped is not None else len(self.ranks) > GROUP_ABOVE

    @property
    def chosen(self) -> Row | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def set_query(self, query: str) -> None:
        self.filter_text = query
        self._restale()

    def _restale(self) -> None:
        self._order_stale = True
        self.show(self.ranks, self.now, self.culprits)

    def _rebuild(self) -> None:
        current = self.chosen
        now = self.now
        shown = [
            r
            for r in self.ranks.values()
            if (not self.filter_text or matches(self.filter_text, r, now))
            and (not self.problems_only or r.rank in self.culprits or columns.status(r, now) != columns.OK)
        ]
        key = SORTS[self.sort]
        culprits = self.culprits
        shown.sort(key=lambda r: (key(r, now), r.rank not in culprits, r.rank), reverse=self.reverse)
        self._members = {}
        for r in sorted(self.ranks.values(), key=lambda r: r.rank):
            self._members.setdefault(r.report.host, []).append(r.rank)
        if self.is_grouped:
            by_host: dict[str, list[RankState]] = {}
            for r in sorted(shown, key=lambda r: r.rank):
                by_host.setdefault(r.report.host, [])
            for r in shown:
                by_host[r.report.host].append(r)
            rows = []
            for host, members in by_host.items():
                rows.append(Row(host=host))
                if host not in self.collapsed:
                    rows.extend(Row(rank=r.rank) for r in members)
        else:
            rows = [Row(rank=r.rank) for r in shown]
        self.rows = rows
        self._order_stale = False
        self._sorted_at = now
        self.virtual_size = Size(self.size.width, len(rows) + 1)
        gpu = any(r.report.gpu is not None for r in self.ranks.values())
        self._hidden = frozenset({"host"} if self.is_grouped else ()) | frozenset(() if gpu else ("GPU memory", "util"))
        if self._moved and current is not None and current in rows:
            self.cursor = rows.index(current)
        self.cursor = min(self.cursor, max(0, len(rows) - 1))

    # --- keys ---------------------------------------------------------------------------

    def action_cursor(self, delta: int) -> None:
        self._move_to(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self._move_to(self.cursor + direction * max(1, self.size.height - 2))

    def action_jump(self, index: int) -> None:
        self._move_to(index if index >= 0 else len(self.rows) - 1)

    def _move_to(self, index: int) -> None:
        if not self.rows:
            return
        self.cursor = max(0, min(len(self.rows) - 1, index))
        self._moved = True
        visible = max(1, self.size.height - 1)
        top = round(self.scroll_offset.y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + visible:
            self.scroll_to(y=self.cursor - visible + 1, animate=False)
        self.refresh()

    def action_choose(self) -> None:
        row = self.chosen
        if row is None:
            return
        if row.host is not None:
            self.collapsed ^= {row.host}
            self._restale()
        elif row.rank is not None:
            self.post_message(self.RankChosen(row.rank))

    def action_cycle_sort(self) -> None:
        names = list(SORTS)
        self.sort = names[(names.index(self.sort) + 1) % len(names)]
        self._restale()
        self.notify(f"Sorted by {self.sort}", timeout=2)

    def action_reverse(self) -> None:
        self.reverse = not self.reverse
        self._restale()

    def action_toggle_groups(self) -> None:
        self.grouped = not self.is_grouped
        self._restale()

    def action_toggle_problems(self) -> None:
        self.problems_only = not self.problems_only
        self._restale()

    def on_click(self, event: events.Click) -> None:
        y = event.y
        if y >= 1:
            self._move_to(round(self.scroll_offset.y) + y - 1)
            if event.chain == 2:
                self.action_choose()

    def on_resize(self, event: events.Resize) -> None:
        self.virtual_size = Size(event.size.width, len(self.rows) + 1)

    # --- drawing ------------------------------------------------------------------------

    def summary(self) -> str:
        """What the table is showing, for the line above it."""
        parts = [f"{len(self.ranks)} ranks", f"sorted by {self.sort}{' ↑' if self.reverse else ''}"]
        if self.filter_text:
            parts.append(f"filter “{self.filter_text}”")
        if self.problems_only:
            parts.append("problems only")
        if len(self.rows) != len(self.ranks):
            parts.append(f"{sum(r.rank is not None for r in self.rows)} shown")
        return " · ".join(parts)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        cols = columns.fitting(width, self._hidden)
        if y == 0:
            style = base + self.get_component_rich_style("rank-table--header")
            cells = [text.fit(c.title, c.width, c.right) for c in cols]
            return self._strip([Segment(" " + " ".join(cells), style)], width, style)
        index = round(self.scroll_offset.y) + y - 1
        if not self.ranks:
            lines = textwrap.wrap(self.empty_message, max(20, width - 4))
            message = lines[y - 2] if 2 <= y < len(lines) + 2 else ""
            return self._strip([Segment(f"  {message}", base)], width, base)
        if index >= len(self.rows):
            return Strip.blank(width, base)
        row = self.rows[index]
        selected = index == self.cursor and self.has_focus
        if row.host is not None:
            return self._node_line(row.host, width, base, selected)
        rank = self.ranks.get(row.rank) if row.rank is not None else None
        if rank is None:
            return Strip.blank(width, base)
        return self._rank_line(rank, cols, width, base, selected or index == self.cursor)

    def _rank_line(self, rank: RankState, cols: list[columns.Column], width: int, base: Style, cursor: bool) -> Strip:
        culprit = rank.rank in self.culprits
        style = base
        if culprit:
            style += self.get_component_rich_style("rank-table--culprit")
        if cursor:
            style += self.get_component_rich_style("rank-table--cursor")
        segments = [Segment("!" if culprit else " ", style)]
        for col in cols:
            cell = text.fit(col.cell(rank, self.now, col.width), col.width, col.right)
            cell_style = style + BADGE[cell.strip()] if col.title == "status" else style
            segments.append(Segment(cell, cell_style))
            segments.append(Segment(" ", style))
        return self._strip(segments, width, style)

    def _node_line(self, host: str, width: int, base: Style, cursor: bool) -> Strip:
        ranks = self._members.get(host, [])
        counts: dict[str, int] = {}
        for r in ranks:
            if r in self.ranks:
                word = columns.status(self.ranks[r], self.now)
                counts[word] = counts.get(word, 0) + 1
        span = f"{ranks[0]}-{ranks[-1]}" if ranks else "-"
        marker = "▸" if host in self.collapsed else "▾"
        health = ", ".join(f"{n} {word}" for word, n in sorted(counts.items()) if word != columns.OK)
        culprits = [r for r in ranks if r in self.culprits]
        style = base + self.get_component_rich_style("rank-table--node")
        if culprits:
            style += self.get_component_rich_style("rank-table--culprit")
        if cursor:
            style += self.get_component_rich_style("rank-table--cursor")
        line = f"{marker} {host}  ranks {span} ({len(ranks)})"
        if health:
            line += f"  {health}"
        if culprits:
            line += f"  culprit {', '.join(map(str, culprits[:4]))}"
        return self._strip([Segment(line, style)], width, style)

    def _strip(self, segments: list[Segment], width: int, style: Style) -> Strip:
        return Strip(segments).crop(0, width).extend_cell_length(width, style)
