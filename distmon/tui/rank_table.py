"""The rank table: one line per rank, thousands of them, drawn with Textual's Line API.

Only the lines on screen are rendered, straight from the monitor's rank states, so what a
redraw costs follows the screen's height, not the world size (``benchmarks/bench_tui.py``
measures redraws). The row order (sort, filter, node groups) is kept between redraws and
rebuilt only when it can have changed: when ranks come or go, when the user changes it, or
once a second for orders that depend on live values.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, overload

import numpy as np
import numpy.typing as npt
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from distmon import wire
from distmon.monitor.overview import Story
from distmon.monitor.state import JobState, RankState, statuses
from distmon.monitor.state.array_sets import distinct
from distmon.monitor.state.columns import F8, I8
from distmon.monitor.state.words import count
from distmon.tui import cells, rank_columns

U8 = npt.NDArray[np.uint64]

GROUP_ABOVE = 64
"""With more ranks than this, the table starts grouped by node."""
RESORT_EVERY = 1.0
"""Seconds of feed time between re-sorts by a live value."""

BADGE = {
    statuses.OK: Style(color="green"),
    statuses.STALLED: Style(color="yellow", bold=True),
    statuses.SILENT: Style(color="magenta", bold=True),
    statuses.FAILED: Style(color="bright_white", bgcolor="red", bold=True),
    statuses.WORKER: Style(color="red", bold=True),
    statuses.EXITED: Style(dim=True),
    statuses.STOPPED: Style(color="red"),
}
CULPRIT_BADGE = Style(color="bright_white", bgcolor="red", bold=True)
WAITING_BADGE = Style(color="yellow")
StatusWords = Callable[[RankState], "str | None"]
"""A rank's status in the story's words (:meth:`distmon.monitor.overview.Story.status`),
None where its flags' word stands."""


def _worst_first(job: JobState, ranks: I8, now: float) -> F8:
    return -job.severities(ranks, now).astype(np.float64)


def _memory(job: JobState, ranks: I8, now: float) -> F8:
    """GPU memory used, else host RSS, largest first."""
    used, rss = job.gpu_used(ranks), job.cols.rss[ranks]
    on_host = np.where(np.isnan(rss), 0.0, rss)
    memory: F8 = -np.where(np.isnan(used) | (used == 0), on_host, used)
    return memory


SortKey = Callable[[JobState, I8, float], F8]
"""A sort key for each of the ranks, read off the columns: one array numpy sorts, no Python per rank."""
SORTS: dict[str, SortKey] = {
    "rank": lambda job, ranks, now: ranks.astype(np.float64),
    "status": _worst_first,
    "step": lambda job, ranks, now: job.cols.steps[ranks].astype(np.float64),
    "step time": lambda job, ranks, now: -np.nan_to_num(job.cols.step_p50[ranks]),
    "memory": _memory,
    "data wait": lambda job, ranks, now: -np.nan_to_num(job.cols.data_wait[ranks]),
    "holds up": lambda job, ranks, now: -np.nan_to_num(job.holdups().share[ranks], nan=-np.inf),
}


@dataclass(frozen=True)
class Row:
    """A line of the table: a rank, or the heading of a node's ranks."""

    rank: int | None = None
    host: str | None = None


class Rows(Sequence[Row]):
    """The table's lines in order, kept as arrays (a rank, or -1 for a node's heading, and
    the host of each line): 131,072 ranks need no object each."""

    def __init__(self, job: JobState | None = None, ranks: I8 | None = None, hosts: U8 | None = None) -> None:
        self._job = job
        self.ranks = np.zeros(0, dtype=np.int64) if ranks is None else ranks
        self.hosts = np.zeros(0, dtype=np.uint64) if hosts is None else hosts

    def __len__(self) -> int:
        return len(self.ranks)

    @overload
    def __getitem__(self, index: int) -> Row: ...
    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...
    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        rank = int(self.ranks[index])
        if rank >= 0 or self._job is None:
            return Row(rank=rank)
        return Row(host=self._job.host_name(int(self.hosts[index])))

    def index(self, row: Any, start: int = 0, stop: int | None = None) -> int:
        if row.rank is not None:
            at = np.flatnonzero(self.ranks == row.rank)
        else:
            at = np.flatnonzero((self.ranks < 0) & (self.hosts == wire.name_hash(row.host)))
        if not len(at):
            raise ValueError(row)
        return int(at[0])

    def __contains__(self, row: object) -> bool:
        try:
            self.index(row)
        except ValueError:
            return False
        return True

    @property
    def shown(self) -> int:
        """Lines that are ranks."""
        return int(np.count_nonzero(self.ranks >= 0))


StoryMatch = Callable[[str, I8], npt.NDArray[np.bool_]]
"""Which of the ranks have a status in the story's words that holds ``word``."""


def matching(
    query: str, job: JobState, ranks: I8, severity: I8, told: StoryMatch | None = None
) -> npt.NDArray[np.bool_]:
    """Which of ``ranks`` match every word of ``query``: a rank (``12``), a range (``8-15``),
    or part of the host name or status word (the flags' word, or the story's: ``waits``,
    ``asleep``)."""
    keep = np.ones(len(ranks), dtype=bool)
    hosts = job.cols.host[ranks]
    for word in query.lower().split():
        if word.isdigit():
            keep &= ranks == int(word)
        elif "-" in word and all(p.isdigit() for p in word.split("-", 1)):
            lo, hi = (int(p) for p in word.split("-", 1))
            keep &= (lo <= ranks) & (ranks <= hi)
        else:
            named = [h for h in distinct(hosts).tolist() if word in job.host_name(h).lower()]
            worded = [i for i, status in enumerate(statuses.STATUSES) if word in status]
            said = told(word, ranks) if told is not None else False
            keep &= np.isin(hosts, np.array(named, dtype=np.uint64)) | np.isin(severity, worded) | said
    return keep


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
        self.job: JobState | None = None
        self.ranks: Mapping[int, RankState] = {}
        self.now = 0.0
        self.culprits: frozenset[int] = frozenset()
        self.status_words: StatusWords = lambda _rank: None
        self.story: Story | None = None
        self.sort = "rank"
        self.reverse = False
        self.grouped: bool | None = None
        """None: decided by the number of ranks."""
        self.problems_only = False
        self.filter_text = ""
        self.collapsed: set[str] = set()
        self.rows = Rows()
        self.empty_message = ""
        """Shown while no rank has reported."""
        self.cursor = 0
        self._order_stale = True
        self._known: int = -1
        self._sorted_at = -math.inf
        self._members: dict[int, I8] = {}
        """Each host's ranks, by host hash."""
        self._hidden: frozenset[str] = frozenset()
        self._moved = False
        """Whether the user has moved the cursor: from then on it follows its row."""

    # --- state from the app -------------------------------------------------------------

    def show(
        self,
        job: JobState,
        now: float,
        culprits: frozenset[int],
        status_words: StatusWords | None = None,
        story: Story | None = None,
    ) -> None:
        """Point the table at the latest state; cheap unless the row order must change."""
        self.job, self.ranks, self.now = job, job.ranks, now
        if status_words is not None:
            self.status_words, self.story = status_words, story
        if culprits != self.culprits:
            self.culprits = culprits
            self._order_stale = True
        if len(self.ranks) != self._known:
            self._known = len(self.ranks)
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
        if self.job is not None:
            self.show(self.job, self.now, self.culprits)

    def _rebuild(self) -> None:
        """The row order, from the columns: filtered, sorted, grouped by node."""
        job, now = self.job, self.now
        if job is None:
            return
        current = self.chosen
        ranks = job.present()
        hosts = job.cols.host[ranks]
        severity = job.severities(ranks, now)
        culprit = np.isin(ranks, list(self.culprits))
        keep = np.ones(len(ranks), dtype=bool)
        if self.filter_text:
            keep &= matching(self.filter_text, job, ranks, severity, self._story_matches)
        if self.problems_only:
            keep &= culprit | (severity != statuses.SEVERITY[statuses.OK])
        shown = ranks[keep]
        order = np.lexsort((shown, ~culprit[keep], SORTS[self.sort](job, shown, now)))
        shown = shown[order[::-1] if self.reverse else order]
        values, inverse = np.unique(hosts, return_inverse=True)
        by_host = np.argsort(inverse, kind="stable")
        members = np.split(ranks[by_host], np.flatnonzero(np.diff(inverse[by_host])) + 1) if len(ranks) else []
        self._members = dict(zip(values.tolist(), members, strict=True))
        if self.is_grouped:
            self.rows = self._grouped(shown, job.cols.host[shown])
        else:
            self.rows = Rows(job, shown, job.cols.host[shown])
        self._order_stale = False
        self._sorted_at = now
        self.virtual_size = Size(self.size.width, len(self.rows) + 1)
        gpu = bool(job.flagged(wire.FLAG_HAS_GPU).any())
        self._hidden = frozenset({"host"} if self.is_grouped else ()) | frozenset(() if gpu else ("GPU memory", "util"))
        if self._moved and current is not None and current in self.rows:
            self.cursor = self.rows.index(current)
        self.cursor = min(self.cursor, max(0, len(self.rows) - 1))

    def _story_matches(self, word: str, ranks: I8) -> npt.NDArray[np.bool_]:
        """Which of ``ranks`` the story's words match ``word``: all the waiting ones share
        theirs, and only the culprits' are asked for."""
        said = np.zeros(len(ranks), dtype=bool)
        story, job = self.story, self.job
        if story is None or job is None:
            return said
        waiting = np.flatnonzero(story.waits)
        if len(waiting) and word in (self.status_words(RankState(job, int(waiting[0]))) or ""):
            said |= story.waits[ranks]
        for rank in story.culprits:
            if rank in self.ranks and word in (self.status_words(self.ranks[rank]) or "").lower():
                said |= ranks == rank
        return said

    def _grouped(self, shown: I8, hosts: U8) -> Rows:
        """``shown`` under a heading per node, the nodes in the order of their lowest rank
        shown, each node's ranks in the order of ``shown``; a collapsed node's hidden."""
        values, inverse = np.unique(hosts, return_inverse=True)
        lowest = np.full(len(values), np.iinfo(np.int64).max)
        np.minimum.at(lowest, inverse, shown)
        order = np.lexsort((np.arange(len(shown)), lowest[inverse]))
        ranks, hosts = shown[order], hosts[order]
        starts = np.flatnonzero(np.r_[True, hosts[1:] != hosts[:-1]]) if len(hosts) else np.zeros(0, dtype=np.int64)
        ranks, hosts = np.insert(ranks, starts, -1), np.insert(hosts, starts, hosts[starts])
        collapsed = np.array([wire.name_hash(host) for host in self.collapsed], dtype=np.uint64)
        hidden = (ranks >= 0) & np.isin(hosts, collapsed)
        return Rows(self.job, ranks[~hidden], hosts[~hidden])

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
        parts = [count(len(self.ranks), "rank"), f"sorted by {self.sort}{' ↑' if self.reverse else ''}"]
        if self.filter_text:
            parts.append(f"filter “{self.filter_text}”")
        if self.problems_only:
            parts.append("problems only")
        if len(self.rows) != len(self.ranks):
            parts.append(f"{self.rows.shown} shown")
        return " · ".join(parts)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        cols = rank_columns.fitting(width, self._hidden)
        if y == 0:
            style = base + self.get_component_rich_style("rank-table--header")
            titles = [cells.fit(c.title, c.width, c.right) for c in cols]
            return self._strip([Segment(" " + " ".join(titles), style)], width, style)
        index = round(self.scroll_offset.y) + y - 1
        if self.job is None or not self.ranks:
            lines = textwrap.wrap(self.empty_message, max(20, width - 4))
            message = lines[y - 2] if 2 <= y < len(lines) + 2 else ""
            return self._strip([Segment(f"  {message}", base)], width, base)
        if index >= len(self.rows):
            return Strip.blank(width, base)
        line = int(self.rows.ranks[index])
        selected = index == self.cursor and self.has_focus
        if line < 0:
            return self._node_line(self.job, int(self.rows.hosts[index]), width, base, selected)
        rank = self.ranks.get(line)
        if rank is None:
            return Strip.blank(width, base)
        return self._rank_line(rank, cols, width, base, selected or index == self.cursor)

    def _rank_line(
        self, rank: RankState, cols: list[rank_columns.Column], width: int, base: Style, cursor: bool
    ) -> Strip:
        culprit = rank.rank in self.culprits
        style = base
        if culprit:
            style += self.get_component_rich_style("rank-table--culprit")
        if cursor:
            style += self.get_component_rich_style("rank-table--cursor")
        segments = [Segment("!" if culprit else " ", style)]
        for col in cols:
            cell_style = style
            if col.title == "status":
                told = self.status_words(rank)
                word = told or rank.status(self.now)
                badge = BADGE[word] if told is None else CULPRIT_BADGE if culprit else WAITING_BADGE
                cell, cell_style = cells.fit(word, col.width, col.right), style + badge
            else:
                cell = cells.fit(col.cell(rank, self.now, col.width), col.width, col.right)
            segments.append(Segment(cell, cell_style))
            segments.append(Segment(" ", style))
        return self._strip(segments, width, style)

    def _node_line(self, job: JobState, host: int, width: int, base: Style, cursor: bool) -> Strip:
        ranks = self._members.get(host, np.zeros(0, dtype=np.int64))
        name = job.host_name(host)
        culprits = [r for r in ranks.tolist() if r in self.culprits]
        waiting = self.story.waits[ranks] if self.story is not None else np.zeros(len(ranks), dtype=bool)
        others = ranks[~waiting & ~np.isin(ranks, culprits)]
        counts = np.bincount(job.severities(others, self.now), minlength=len(statuses.STATUSES))
        span = f"{ranks[0]}-{ranks[-1]}" if len(ranks) else "-"
        marker = "▸" if name in self.collapsed else "▾"
        words = sorted((word, int(n)) for word, n in zip(statuses.STATUSES, counts, strict=True) if n)
        told = [f"{np.count_nonzero(waiting)} waiting"] if waiting.any() else []
        health = ", ".join(told + [f"{n} {word}" for word, n in words if word != statuses.OK])
        style = base + self.get_component_rich_style("rank-table--node")
        if culprits:
            style += self.get_component_rich_style("rank-table--culprit")
        if cursor:
            style += self.get_component_rich_style("rank-table--cursor")
        line = f"{marker} {name}  ranks {span} ({len(ranks)})"
        if health:
            line += f"  {health}"
        if culprits:
            line += f"  culprit {', '.join(map(str, culprits[:4]))}"
        return self._strip([Segment(line, style)], width, style)

    def _strip(self, segments: list[Segment], width: int, style: Style) -> Strip:
        return Strip(segments).crop(0, width).extend_cell_length(width, style)
