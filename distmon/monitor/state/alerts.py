"""Alerts: what the detector tells a person, and their lifecycle (raised, updated, resolved)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

WARNING = "warning"
CRITICAL = "critical"
MAX_HISTORY = 1000
"""Alerts kept for display and the report; the oldest resolved ones go first."""


@dataclass
class Finding:
    """A condition a rule sees true right now. ``key`` identifies it across ticks."""

    key: str
    kind: str
    severity: str
    ranks: list[int]
    summary: str
    """One line that names the culprits; it does not repeat ``kind`` (see :attr:`Alert.headline`)."""
    detail: str
    doing: dict[int, str] = field(default_factory=dict)
    """What the ranks it names do, in their status's words (:mod:`distmon.monitor.state.statuses`),
    as the rule saw them when it wrote the rest: the words their rows show."""


@dataclass
class Alert:
    """An alert as users and tools see it: the JSON shape of ``distmon report --json``."""

    kind: str
    severity: str
    ranks: list[int]
    t: float
    """Unix time when first raised."""
    summary: str
    detail: str
    key: str = field(default="", compare=False)
    resolved: float | None = field(default=None, compare=False)
    doing: dict[int, str] = field(default_factory=dict, compare=False)
    """:attr:`Finding.doing`, as of the latest tick: for the screens, not part of the JSON shape
    and no change of the alert's (a recording's alerts come without it, and a replay's rules
    write it again)."""

    @property
    def headline(self) -> str:
        """The alert in one line, for logs, chat and lists: ``hang: rank 2 holds up the job ...``."""
        return f"{self.kind}: {self.summary}"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "ranks": list(self.ranks),
            "t": self.t,
            "summary": self.summary,
            "detail": self.detail,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any], key: str = "") -> Alert:
        return cls(
            kind=str(obj["kind"]),
            severity=str(obj["severity"]),
            ranks=[int(r) for r in obj["ranks"]],
            t=float(obj["t"]),
            summary=str(obj["summary"]),
            detail=str(obj["detail"]),
            key=key,
        )


@dataclass
class Change:
    """One step in an alert's life, as recorded: ``raised``, ``updated`` or ``resolved``."""

    event: str
    alert: Alert
    """The alert itself, which the ticks after this one go on updating."""
    escalated: bool = False
    """An update that turned a warning critical (a culprit found not to be working): a page,
    as a critical alert raised would be."""
    then: Alert = field(init=False, compare=False)
    """The alert as this change left it: what its line says and its record keeps, whenever
    they are written (a loop that runs two ticks before it prints, a screen's thread)."""

    def __post_init__(self) -> None:
        self.then = replace(self.alert, ranks=list(self.alert.ranks), doing=dict(self.alert.doing))


class AlertBook:
    """Turns each tick's findings into raised, updated and resolved alerts."""

    def __init__(self) -> None:
        self.active: dict[str, Alert] = {}
        self.history: list[Alert] = []
        """Every alert ever raised, oldest first (resolved ones keep their ``resolved``)."""
        self._notes: dict[str, str] = {}
        """What happened because of an active alert (distmon ended the job), kept at the end
        of its detail while the rule rewrites the rest."""

    def annotate(self, key: str, note: str) -> Change | None:
        """Add ``note`` to the active alert ``key``; returns the change, None if it is gone."""
        alert = self.active.get(key)
        if alert is None:
            return None
        self._notes[key] = self._notes.get(key, "") + "\n" + note
        alert.detail += "\n" + note
        return Change("updated", alert)

    def update(self, findings: list[Finding], now: float, resolve: bool = True) -> list[Change]:
        """Apply one tick's findings. With ``resolve`` False the job is being stopped: what stood
        then ends with it as it stood, neither resolved nor rewritten by the teardown (ranks
        leaving one by one would otherwise turn a hang's evidence into "rank 2 exited")."""
        changes: list[Change] = []
        seen = set()
        for f in findings:
            seen.add(f.key)
            alert = self.active.get(f.key)
            if alert is None:
                alert = Alert(f.kind, f.severity, f.ranks, now, f.summary, f.detail, key=f.key, doing=f.doing)
                self.active[f.key] = alert
                self.history.append(alert)
                if len(self.history) > MAX_HISTORY:
                    self._forget_oldest()
                changes.append(Change("raised", alert))
                continue
            if not resolve:
                continue
            alert.doing = f.doing  # the words of the moment: no change to tell of
            detail = f.detail + self._notes.get(f.key, "")
            if (alert.severity, alert.ranks, alert.summary, alert.detail) != (f.severity, f.ranks, f.summary, detail):
                escalated = alert.severity != CRITICAL and f.severity == CRITICAL
                alert.severity, alert.ranks = f.severity, f.ranks
                alert.summary, alert.detail = f.summary, detail
                changes.append(Change("updated", alert, escalated))
        for key in list(self.active) if resolve else []:
            if key not in seen:
                self._notes.pop(key, None)
                alert = self.active.pop(key)
                alert.resolved = now
                changes.append(Change("resolved", alert))
        return changes

    def follow(self, event: str, alert: Alert, t: float) -> Change | None:
        """Another monitor's change to its alert ``alert`` (as it stands after the change), at
        ``t``: how a screen attached to a monitor keeps its alerts, judging none itself. An
        update or resolution of an alert not standing here is one this book missed: an update
        raises it, a resolution is dropped."""
        standing = self.active.get(alert.key)
        if event == "resolved":
            if standing is None:
                return None
            del self.active[alert.key]
            standing.resolved = t
            return Change("resolved", standing)
        if standing is None:
            self.active[alert.key] = alert
            self.history.append(alert)
            if len(self.history) > MAX_HISTORY:
                self._forget_oldest()
            return Change("raised", alert)
        escalated = standing.severity != CRITICAL and alert.severity == CRITICAL
        standing.severity, standing.ranks = alert.severity, alert.ranks
        standing.summary, standing.detail = alert.summary, alert.detail
        return Change("updated", standing, escalated)

    def told_doing(self, doing: dict[str, dict[int, str]]) -> None:
        """What the ranks of the standing alerts do, by alert key, as the monitor that judged
        them said it (a screen attached to it keeps its words)."""
        for key, said in doing.items():
            if key in self.active:
                self.active[key].doing = said

    def restore(self, history: list[Alert], active: list[Alert]) -> None:
        """Another monitor's alerts as they stand: every alert it raised so far (resolved ones
        with their ``resolved``), and those standing, the same objects where the history holds
        them."""
        self.history = history[-MAX_HISTORY:]
        self.active = {alert.key: alert for alert in active}
        self._notes = {}

    def _forget_oldest(self) -> None:
        for i, alert in enumerate(self.history):
            if alert.resolved is not None:
                del self.history[i]
                return
        del self.history[0]
