"""A screen attached to the monitor (``distmon watch --attach``) never slows it: the monitor of
``bench_scale.py`` (simulated ranks through real relays, one rank hung), run three ways.

    .venv/bin/python benchmarks/bench_attach.py --ranks 8192 [--interval 1] [--modes none stopped reading] [--json]

- ``none``: no screen attached (the monitor's screens' socket bound, as ``distmon record``
  binds it);
- ``stopped``: a screen attaches, shows the job once its ranks report, and is then stopped
  with SIGSTOP for the rest of the run: the monitor must skip it, not wait for it;
- ``reading``: a screen attaches and keeps reading (its feed and its AttachedMonitor through the
  Session, as ``distmon watch --attach`` runs them, without drawing).

Each way runs in a process of its own. Each row: the monitor's sustained intake
(``reports_per_s``), its median tick during the hang (``tick_ms_median``), how soon it named
the culprit (``alert_s``), its RSS, and for a screen: when it showed the job (seconds after
the monitor started), how often the monitor skipped it (``skips``), and what the reading
screen showed at the end (its culprits, its alerts, its catch-ups). With ``--json`` the last
line is the rows as one JSON list.
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

from distmon.monitor.attach.serve import AttachServer

SCREEN = """
import sys, time
from distmon.monitor.attach.feed import AttachedFeed
from distmon.monitor.attach.follow import AttachedMonitor
from distmon.monitor.overview import OverviewTracker
from distmon.monitor.session import Session
feed = AttachedFeed(sys.argv[1])
problem = feed.attach(120)
assert problem is None, problem
follower = AttachedMonitor(feed)
tracker = OverviewTracker(feed.progress)
session = Session(feed, follower, on_tick=lambda now: tracker.observe(follower, now))
end, said = time.time() + float(sys.argv[2]), False
while time.time() < end:
    deadline = time.perf_counter() + 0.03  # as the app drains its feed: 30 ms every 50 ms
    while True:
        session.run_timed(500)
        if not session.taken or time.perf_counter() > deadline:
            break
    if not said and follower.state.ranks:
        print("watching", flush=True)  # the job as the monitor holds it, ranks and all
        said = True
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
        """Called at each turn of the monitor's loop: stop the screen once it shows the job."""
        if self.caught_up is not None:
            return
        import select

        if select.select([self._out], [], [], 0)[0]:
            line = self._out.readline().strip()
            assert line == "watching", line
            self.caught_up = time.time() - self.began
            if self.mode == "stopped":
                self.process.send_signal(signal.SIGSTOP)

    def end(self) -> str:
        if self.mode == "stopped":
            self.process.kill()
            self.process.wait()
            return ""
        return self._out.readline().strip() if self.process.wait(120) == 0 else "the screen failed"


def run(ranks: int, mode: str, healthy: int, hung: int, interval: int = 1) -> dict[str, object]:
    """One run of ``bench_scale`` with a screen ``mode``."""
    made: list[AttachServer] = []
    screens: list[Screen] = []

    def bind(endpoint: str) -> AttachServer:
        made.append(AttachServer(endpoint))
        if mode != "none":
            screens.append(Screen(endpoint, mode, 20 + ranks / 4000 + healthy + hung))  # bench_scale's start
        return made[0]

    def turn() -> None:
        for screen in screens:
            screen.turn()

    result = bench_scale.run(ranks, 4, 2, healthy, hung, interval, screens=bind, on_turn=turn)
    result.pop("said")
    result = {"screen": mode, **result, "skips": made[0].skips}
    for screen in screens:
        result["caught_up_s"] = None if screen.caught_up is None else round(screen.caught_up, 1)
        result["screen_said"] = screen.end()
    return result


def one(mode: str, args: argparse.Namespace) -> dict[str, object]:
    command = [sys.executable, __file__, "--ranks", str(args.ranks), "--healthy", str(args.healthy)]
    command += ["--hung", str(args.hung), "--interval", str(args.interval), "--modes", mode, "--json"]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    row: dict[str, object] = json.loads(done.stdout.splitlines()[-1])[0]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=8192)
    parser.add_argument("--healthy", type=int, default=5, help="seconds of the healthy job first (default: 5)")
    parser.add_argument("--hung", type=int, default=20, help="seconds of the hang (default: 20)")
    parser.add_argument(
        "--interval", type=int, default=1, help="seconds between a rank's reports, DISTMON_INTERVAL (default: 1)"
    )
    parser.add_argument("--modes", nargs="+", default=["none", "stopped", "reading"], help="screens to run")
    parser.add_argument("--json", action="store_true", help="print the rows as one JSON list on the last line")
    args = parser.parse_args()
    if len(args.modes) == 1:
        rows = [run(args.ranks, args.modes[0], args.healthy, args.hung, args.interval)]
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
