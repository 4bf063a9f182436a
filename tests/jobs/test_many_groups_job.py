"""A real rank in 32 process groups (tests/support/scripts/thirty_two_groups.py, 3 gloo ranks under
torchrun, watched by a real ``distmon record``), stalled before the collective of the last
group created: it is named, with that group."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.support.paths import SCRIPTS
from tests.support.recorder import recording

JOB = SCRIPTS / "thirty_two_groups.py"
CULPRIT = 2


def test_a_rank_stalled_in_the_last_of_32_groups_is_named_with_that_group(
    torchrun: Callable, endpoint: str, tmp_path: Path
) -> None:
    with (
        recording(tmp_path / "run.distmon", endpoint) as recorder,
        torchrun(3, "--culprit", str(CULPRIT), endpoint=endpoint, script=JOB) as job,
    ):
        recorder.wait_critical("hang", timeout=60, job=job)
        alerts = recorder.alerts()
    (hang,) = [a for a in alerts if a["kind"] == "hang"]
    assert hang["ranks"] == [CULPRIT], hang["summary"]
    assert "(all_reduce) of group" in hang["summary"] and "(g31, ranks 0-2)" in hang["summary"], hang["summary"]
    assert "ranks 0-1 in collective" in hang["detail"] and "(g31, ranks 0-2) for rank 2" in hang["detail"]
    assert "thirty_two_groups.py" in hang["detail"], "the culprit's own stack"
