"""The doctor's verdicts and how they are shown: an aligned table or JSON."""

from __future__ import annotations

import json
import textwrap
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

_WRAP: dict[str, Any] = {"break_long_words": False, "break_on_hyphens": False}


class Status(str, Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Check:
    """One finding. ``fix`` says what to do; a warning or failure always has one."""

    name: str
    status: Status
    detail: str
    fix: str | None = None


def passed(name: str, detail: str) -> Check:
    return Check(name, Status.PASS, detail)


def warned(name: str, detail: str, fix: str) -> Check:
    return Check(name, Status.WARN, detail, fix)


def failed(name: str, detail: str, fix: str) -> Check:
    return Check(name, Status.FAIL, detail, fix)


def exit_code(checks: list[Check]) -> int:
    return 1 if any(c.status is Status.FAIL for c in checks) else 0


def summary(checks: list[Check]) -> str:
    fails = sum(c.status is Status.FAIL for c in checks)
    warns = sum(c.status is Status.WARN for c in checks)
    verdict = "problems found" if fails else "ready, with warnings" if warns else "ready"
    return f"{verdict}: {len(checks)} checks, {fails} failed, {warns} warnings"


def table(checks: list[Check], width: int = 100) -> str:
    """One line per check, its fix indented under it."""
    name_width = max((len(c.name) for c in checks), default=0)
    indent = " " * (6 + name_width + 2)
    lines = []
    for c in checks:
        head = f"{c.status.value.upper():<6}{c.name:<{name_width}}  "
        lines.extend(textwrap.wrap(c.detail, width, initial_indent=head, subsequent_indent=indent, **_WRAP) or [head])
        if c.fix:
            lines.extend(
                textwrap.wrap(
                    f"fix: {c.fix}", width, initial_indent=indent, subsequent_indent=indent + "     ", **_WRAP
                )
            )
    lines.append(summary(checks))
    return "\n".join(lines)


def to_json(checks: list[Check], **extra: Any) -> str:
    document = {"ok": exit_code(checks) == 0, "checks": [asdict(c) for c in checks], **extra}
    return json.dumps(document, indent=2)
