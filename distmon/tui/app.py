"""The terminal UI shared by ``distmon watch`` (``--attach`` too) and ``distmon replay``.

Threading rule: the app never waits on the network. A feed (live or replay) queues
messages; a fast timer steps the session (:class:`~distmon.monitor.session.Session`) that
drains them into the monitor within a small time budget, and a slower timer redraws every
widget from the monitor's latest state. Both run on the feed's clock, so a replay goes
through exactly the code that a live run does; the session is finished when a replay ends
and when the app quits, with the closing tick ``record`` runs.
"""

from __future__ import annotations

import math
import os
import time
from typing import ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Static

from distmon.monitor.attach.feed import SILENT_AFTER
from distmon.monitor.intake.feeds import ATTACHED, LIVE, Feed, Player
from distmon.monitor.overview import OverviewTracker
from distmon.monitor.pipeline import Monitor, Monitoring
from distmon.monitor.session import Session, Timed
from distmon.tui import cells
from distmon.tui.alert_detail import AlertDetail
from distmon.tui.alerts_panel import AlertsPanel
from distmon.tui.filter_bar import FilterBar
from distmon.tui.help_screen import HelpScreen
from distmon.tui.job_header import JobHeader
from distmon.tui.rank_detail import RankDetail
from distmon.tui.rank_table import RankTable, StatusWords

DRAIN_EVERY = 0.05
DRAIN_BUDGET = 0.03
"""Seconds of work per drain, so that keys stay responsive while a fast replay catches up."""
REDRAW_EVERY = 0.25
SPEEDS = (1.0, 10.0, 100.0, math.inf)
REPLAY_ACTIONS = {"toggle_pause", "step", "next_alert", "faster", "slower"}


def speed_name(speed: float) -> str:
    return "max" if math.isinf(speed) else f"{speed:g}x"


class DistmonApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "distmon"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("a", "focus_alerts", "Alerts", show=False),
        Binding("space", "toggle_pause", "Pause"),
        Binding("full_stop", "step", "Step", key_display="."),
        Binding("n", "next_alert", "Next alert"),
        Binding("plus,equals_sign", "faster", "Faster", key_display="+", show=False),
        Binding("minus", "slower", "Slower", key_display="-", show=False),
    ]

    def __init__(self, feed: Feed, monitor: Monitoring, tracker: OverviewTracker | None = None) -> None:
        super().__init__()
        self.feed = feed
        self.monitor = monitor
        self.tracker = tracker or OverviewTracker()
        self.session = Session(feed, monitor, on_tick=lambda now: self.tracker.observe(monitor, now))
        self.overview = self.tracker.overview(monitor, feed.now())
        # The widgets are held, not queried: the redraw timer can fire while they are
        # being removed at exit.
        self.header = JobHeader(id="header")
        self.summary = Static(id="table-summary")
        self.table = RankTable(id="ranks")
        self.filter_bar = FilterBar(id="filter")
        self.alerts_panel = AlertsPanel(id="alerts")

    def compose(self) -> ComposeResult:
        yield self.header
        yield self.summary
        yield self.table
        yield self.filter_bar
        yield self.alerts_panel
        yield Footer()

    def on_mount(self) -> None:
        self.filter_bar.display = False
        self.focus_table()
        self.redraw()
        self.set_interval(DRAIN_EVERY, self.drain)
        self.set_interval(REDRAW_EVERY, self.redraw)

    def on_unmount(self) -> None:
        self._raised(self.session.finish())
        self.session.close()

    # --- the two timers -----------------------------------------------------------------

    def drain(self) -> None:
        """Feed the monitor what has arrived, for at most ``DRAIN_BUDGET`` seconds; at the
        end of a replay, finish the session."""
        deadline = time.perf_counter() + DRAIN_BUDGET
        while True:
            self._raised(self.session.run_timed(500))
            if self.session.taken == 0 or time.perf_counter() > deadline:
                break
        if self.feed.finished and self.session.taken == 0:
            self._raised(self.session.finish())

    def _raised(self, changes: Timed) -> None:
        """A replay jumping to the next alert stops at one raised here."""
        player = self.feed.player
        for _, change in changes:
            if change.event == "raised" and player is not None:
                player.alert_raised(change.alert.t)

    def redraw(self) -> None:
        now = self.feed.now()
        self.overview = self.tracker.overview(self.monitor, now)
        self.header.show(self.overview)
        self.table.empty_message = self.waiting_help()
        self.table.show(self.monitor.state, now, self.overview.culprits, self.status_words(), self.overview.story)
        self._show_summary()
        self.alerts_panel.show(self.monitor.alerts)
        if self.screen_stack and isinstance(self.screen, RankDetail):  # no screen: the app is closing
            rank = self.screen.rank
            state = self.monitor.state.ranks.get(rank)
            told = self.status_words()(state) if state is not None else None
            self.screen.show(state, now, rank in self.overview.culprits, told)

    def status_words(self) -> StatusWords:
        """Each rank's status in the story's words, as of the latest redraw."""
        story = self.overview.story
        if story is None:
            return lambda _rank: None
        return story.status

    def waiting_help(self) -> str:
        """What to do while nothing has connected."""
        source = self.feed.source()
        if source.kind == LIVE:
            endpoint = source.where
            return (
                f"Nothing connected yet. Listening on {endpoint}. Start the job with no change to it: "
                f"DISTMON_ENDPOINT={endpoint} distmon run -- torchrun --nproc-per-node=N train.py "
                f"(or put `import distmon.hooks; distmon.hooks.attach(model)` in the script and set "
                f"DISTMON_ENDPOINT={endpoint} for its ranks). More screens: distmon watch --attach {endpoint}"
            )
        if source.kind == ATTACHED:
            return f"Attached to the monitor at {source.where}: no rank has reported to it yet."
        return "No rank has reported yet in this recording."

    def source(self) -> str:
        """Where the messages come from, and how that is going."""
        source, player = self.feed.source(), self.feed.player
        if source.kind == LIVE:
            dropped = f" · {source.dropped} dropped (UI behind)" if source.dropped else ""
            return f"live · {source.where}{dropped}"
        if source.kind == ATTACHED:
            silent = source.silent_for
            lost = f" · monitor silent for {cells.short_duration(silent)}" if silent > SILENT_AFTER else ""
            return f"attached · {source.where}{lost}"
        if player is None:
            return source.where
        if self.feed.finished:
            mode = "end of recording"
        elif player.jumping:
            mode = "to next alert"
        else:
            mode = "paused" if player.paused else f"playing {speed_name(player.speed)}"
        at = cells.short_duration(self.feed.now() - player.start)
        return f"replay {os.path.basename(source.where)} · {mode} · at {at}"

    # --- navigation ---------------------------------------------------------------------

    def focus_table(self) -> None:
        self.table.focus()

    def open_rank(self, rank: int) -> None:
        self.push_screen(RankDetail(rank))
        self.call_after_refresh(self.redraw)

    def on_rank_table_rank_chosen(self, event: RankTable.RankChosen) -> None:
        self.open_rank(event.rank)

    def on_alerts_panel_alert_chosen(self, event: AlertsPanel.AlertChosen) -> None:
        self.push_screen(AlertDetail(event.alert))

    def on_alert_detail_rank_wanted(self, event: AlertDetail.RankWanted) -> None:
        self.open_rank(event.rank)

    def on_filter_bar_done(self, _event: FilterBar.Done) -> None:
        self.focus_table()

    def on_filter_bar_query_changed(self, event: FilterBar.QueryChanged) -> None:
        self.table.set_query(event.query)
        self._show_summary()

    def _show_summary(self) -> None:
        summary = Text(no_wrap=True, overflow="ellipsis")
        summary.append(self.source(), style="bold")
        summary.append(" · " + self.table.summary())
        self.summary.update(summary)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_filter(self) -> None:
        self.filter_bar.display = True
        self.filter_bar.focus()

    def action_focus_alerts(self) -> None:
        self.alerts_panel.focus()

    # --- replay controls ----------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in REPLAY_ACTIONS:
            return self.feed.player is not None
        return True

    def _replay(self) -> Player:
        player = self.feed.player
        assert player is not None, "a replay action on a feed that plays nothing"
        return player

    def action_toggle_pause(self) -> None:
        self._replay().toggle_pause()
        self.redraw()

    def action_step(self) -> None:
        self._replay().step()
        self.drain()
        self.redraw()

    def action_next_alert(self) -> None:
        self._replay().jump_to_next_alert()

    def action_faster(self) -> None:
        self._change_speed(+1)

    def action_slower(self) -> None:
        self._change_speed(-1)

    def _change_speed(self, direction: int) -> None:
        feed = self._replay()
        index = next((i for i, s in enumerate(SPEEDS) if s >= feed.speed), len(SPEEDS) - 1)
        index = max(0, min(len(SPEEDS) - 1, index + direction))
        feed.set_speed(SPEEDS[index])
        self.redraw()


def build_app(feed: Feed, monitor: Monitoring | None = None, tracker: OverviewTracker | None = None) -> DistmonApp:
    """The app for a feed: what ``distmon watch`` (``--attach``: a feed from a monitor running
    elsewhere, a :class:`~distmon.monitor.attach.follow.AttachedMonitor` of it, and its progress so far),
    ``distmon replay`` and the tests run."""
    return DistmonApp(feed, monitor or Monitor(), tracker)
