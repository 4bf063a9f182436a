"""What a verdict of ``distmon analyze`` says, for the tests' assertions."""

from __future__ import annotations

from distmon.forensics.blame import Blame


def alone(verdict: Blame) -> list[int]:
    """The ranks suspected for a failure the log shows alone, no other rank beside it: every rank
    may have failed so. Empty where the verdict proves a rank or says anything else."""
    return [s.rank for s in verdict.suspects] if verdict.alone and not verdict.culprits else []
