"""The detector: at each tick it runs the rules on the job's state at the time given, and
returns their findings. It is no pure function of the state: it keeps what the rules learn
from tick to tick, and the prober starts looking at a rank the first time a rule asks of it.
What it keeps:

- the job's routine pauses (:class:`~distmon.monitor.rules.routine.Routine`), learned as it runs;
- the ranks named early, with what they were seen doing, while an alert names them;
- whether the job stood still over each drop of a node's link, judged once when it was told;
- when each rank found from outside was last seen standing in a wait at its peers;
- the findings of each slower rule, which stand between its turns
  (:data:`~distmon.monitor.rules.SLOW_PERIOD`);
- while the monitor is behind, the incidents found before.

So the same findings come of the same ticks in the same order: a replay runs the live
monitor's every tick from the start (:class:`distmon.monitor.session.Session`), never one
tick alone.

Each rule in :mod:`distmon.monitor.rules` looks at the whole job and names culprits, not
victims: the rank the others wait for, the rank that failed first. Thresholds follow the
job's own pace (its median step time) above fixed floors, so a 20 ms step and a 2 s step
are judged alike and a healthy job raises nothing.

While the monitor is behind (:mod:`distmon.monitor.rules.keeping_up`), silence names no rank, and an
incident found before stands until it has caught up: a report it dropped is no proof that
the incident ended.
"""

from __future__ import annotations

from distmon.monitor.outside.sight import Sight
from distmon.monitor.outside.verdicts import Verdict
from distmon.monitor.rules import RULES, Rule
from distmon.monitor.rules.base import Context, Outside, Probe, StackSource
from distmon.monitor.rules.keeping_up import KeepingUp
from distmon.monitor.rules.routine import Routine
from distmon.monitor.state import JobState
from distmon.monitor.state.alerts import Finding
from distmon.monitor.state.kinds import AlertKind
from distmon.monitor.state.limits import Thresholds


class Detector:
    def __init__(
        self,
        probe: Probe | None = None,
        limits: Thresholds | None = None,
        stacks: StackSource | None = None,
        outside: Outside | None = None,
        sight: Sight | None = None,
    ) -> None:
        self.probe = probe
        self.stacks = stacks
        self.outside = outside
        self.sight = sight
        """What the nodes' eyes saw: once any eye has spoken, the rules ask it, not the
        callables above (which tests hand in)."""
        self.keeping_up = KeepingUp()
        self._last: dict[str, Finding] = {}
        self.limits = limits or Thresholds()
        self.rules: list[tuple[Rule, float]] = list(RULES)
        self._held: dict[Rule, tuple[float, list[Finding]]] = {}
        self._named_early: dict[int, Verdict] = {}
        self._drops: dict[tuple[str, str, float], bool | None] = {}
        self._seen_waiting: dict[int, float] = {}
        self.routine = Routine()
        """The pauses the job takes as a habit, learned as it runs."""

    @property
    def sources(self) -> tuple[Probe | None, StackSource | None, Outside | None]:
        """Where the rules learn of processes: what the nodes' eyes saw, once one has spoken
        (a live monitor's own eye at once; a replay's once the recording says so; an old
        recording never), else the callables handed in."""
        if self.sight is not None and self.sight.eyes:
            return self.sight.state, self.sight.stack, self.sight.view
        return self.probe, self.stacks, self.outside

    def evaluate(self, state: JobState, now: float) -> list[Finding]:
        probe, stacks, outside = self.sources
        context = Context(
            now=now,
            pace=state.pace(),
            probe=probe,
            limits=self.limits,
            stacks=stacks,
            interval=state.interval(),
            outside=outside,
            named_early=self._named_early,
            drops=self._drops,
            seen_waiting=self._seen_waiting,
            routine=self.routine,
            standing=frozenset(self._last),
            ended=self.sight.ended if self.sight is not None and self.sight.eyes else None,
        )
        context.behind = self.keeping_up.behind(state, now, context.interval, self.limits)
        findings: list[Finding] = []
        for rule, period in self.rules:
            due, held = self._held.get(rule, (now, []))
            if now >= due:
                held = rule(state, context)
                self._held[rule] = (now + period, held)
            findings.extend(held)
        if context.behind is not None:
            # Behind, the monitor cannot see an incident end: it keeps what it found until it has caught up.
            found = {f.key for f in findings}
            findings += [f for key, f in self._last.items() if key not in found and f.kind != AlertKind.MONITOR_BEHIND]
        self._last = {f.key: f for f in findings}
        self.routine.settle(lambda rank: rank in state.ranks and state.ranks[rank].live(now), context.behind is None)
        named = {rank for f in findings for rank in f.ranks}
        for rank in [rank for rank in self._named_early if rank not in named]:
            del self._named_early[rank]
        return findings
