"""A screen attached to the monitor (``distmon watch --attach``) never slows it: the monitor of
``bench_scale.py`` (simulated ranks through real relays, one rank hung), run three ways.

    .venv/bin/python benchmarks/bench_attach.py --ranks 8192 [--json]

- ``none``: no screen attached (the monitor's screens' socket bound, as ``distmon record``
  binds it);
- ``stopped``: a screen attaches, takes its catch-up, and is stopped with SIGSTOP for the
  rest of the run: the monitor must skip it, not wait for it;
- ``reading``: a screen attaches and keeps reading (its feed and its Follower through the
  Session, as ``distmon watch --attach`` runs them, without drawing).

Each way runs in a process of its own. Each row: the monitor's sustained intake
(``reports_per_s``), its median tick during the hang (``tick_ms_median``), how soon it named
the culprit (``alert_s``), its RSS, and for a screen:
when it caught up (seconds after the monitor started), how often the monitor skipped it
(``skips``), and what the reading screen showed at the end (its culprits, and whether its
alerts are the monitor's). With ``--json`` the last line is the rows as one JSON list.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import bench_scale

from distmon.monitor.broadcast import Broadcast

SCREEN = """
import sys, time
from distmon.monitor.intake.attached import AttachedFeed
from distmon.monitor.monitor import Follower
from distmon.monitor.overview import OverviewTracker
from distmon.monitor.session import Session
feed = AttachedFeed(sys.argv[1])
problem = feed.attach(120)
print(problem or "attached", flush=True)
follower = Follower(feed)
tracker = OverviewTracker(feed.progress)
session = Session(feed, follower, on_tick=lambda now: tracker.observe(follower, now))
end = time.time() + float(sys.argv[2])
while time.time() < end:
    session.run_timed(500)
    time.sleep(0.05)
overview = tracker.overview(follower, feed.now())
alerts = [(a.kind, a.ranks, a.t) for a in follower.alerts.history]
print(sorted(overview.culprits), alerts, feed.catch_ups, flush=True)
"""


class Screen:
    """A screen in a process of its own, stopped once caught up (``stopped``) or reading."""

    def __init__(self, endpoint: str, mode: str, seconds: float) -> None:
        self.mode = mode
        self.began = time.time()
        self.caught_up: float | None = None
        self.process = subprocess.Popen(
            [sys.executable, "-c", SCREEN, endpoint, str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).parent.parent,
        )
        assert self.process.stdout is not None
        self._out = self.process.stdout

    def turn(self) -> None:
        """Called at each turn of the monitor's loop: stop the screen once it has caught up."""
        if self.caught_up is not None:
            return
        import select

        if select.select([self._out], [], [], 0)[0]:
            line = self._out.readline().strip()
            assert line == "attached", line
            self.caught_up = time.time() - self.began
            if self.mode == "stopped":
                self.process.send_signal(signal.SIGSTOP)

    def end(self) -> str:
        if self.mode == "stopped":
            self.process.kill()
            self.process.wait()
            return ""
        return self._out.readline().strip() if self.process.wait(120) == 0 else "the screen failed"


def run(ranks: int, mode: str, healthy: int, hung: int) -> dict[str, object]:
    """One run of ``bench_scale`` with a screen ``mode``."""
    made: list[Broadcast] = []
    screens: list[Screen] = []

    def bind(endpoint: str) -> Broadcast:
        made.append(Broadcast(endpoint))
        if mode != "none":
            screens.append(Screen(endpoint, mode, healthy + hung + 10))
        return made[0]

    def turn() -> None:
        for screen in screens:
            screen.turn()

    result = bench_scale.run(ranks, 4, 2, healthy, hung, 1, viewers=bind, on_turn=turn)
    result.pop("said")
    result = {"screen": mode, **result, "skips": made[0].skips}
    for screen in screens:
        result["caught_up_s"] = None if screen.caught_up is None else round(screen.caught_up, 1)
        result["screen_said"] = screen.end()
    return result


def one(mode: str, args: argparse.Namespace) -> dict[str, object]:
    command = [sys.executable, __file__, "--ranks", str(args.ranks), "--healthy", str(args.healthy)]
    command += ["--hung", str(args.hung), "--modes", mode, "--json"]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    row: dict[str, object] = json.loads(done.stdout.splitlines()[-1])[0]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=8192)
    parser.add_argument("--healthy", type=int, default=5, help="seconds of the healthy job first (default: 5)")
    parser.add_argument("--hung", type=int, default=20, help="seconds of the hang (default: 20)")
    parser.add_argument("--modes", nargs="+", default=["none", "stopped", "reading"], help="screens to run")
    parser.add_argument("--json", action="store_true", help="print the rows as one JSON list on the last line")
    args = parser.parse_args()
    if len(args.modes) == 1:
        rows = [run(args.ranks, args.modes[0], args.healthy, args.hung)]
    else:  # each in a process of its own: the monitor's RSS is its own run's
        rows = [one(mode, args) for mode in args.modes]
    keys = ["screen", "ranks", "reports_per_s", "tick_ms_median", "alert_s", "named", "monitor_rss_mb", "dropped"]
    keys += ["caught_up_s", "skips"]
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(str(row.get(k, "")) if k != "named" else str(row[k])[:30] for k in keys) + " |")
    for row in rows:
        if row.get("screen_said"):
            print(f"the {row['screen']} screen's culprits, its alerts and catch-ups: {row['screen_said']}")
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
