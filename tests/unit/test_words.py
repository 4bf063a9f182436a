"""Each phrase is written once (:mod:`distmon.monitor.state.words`): an exception's first line
and how it is cut, a group's short label, a collective in flight and the time left to its
timeout; the terminal UI's short durations agree with the words' above a second."""

from __future__ import annotations

from distmon.monitor.state.whereabouts import short_path
from distmon.monitor.state.words import (
    FIRST_LINE,
    FIRST_LINE_IN_DETAIL,
    duration,
    first_line,
    group_label,
    in_flight,
    timeout_left,
)
from distmon.tui import cells
from distmon.wire import GroupStatus


def group(enqueued: int, completed: int, timeout: float | None = 1800.0, desc: str | None = None) -> GroupStatus:
    return GroupStatus(
        id="7",
        backend="nccl",
        size=2,
        ranks=[[0, 2, 1]],
        timeout=timeout,
        enqueued=enqueued,
        completed=completed,
        desc=desc,
    )


def test_an_exceptions_first_line_is_quoted_alone_and_cut_with_an_ellipsis() -> None:
    assert first_line("\n  CUDA error: an illegal memory access\nCompile with TORCH_USE_CUDA_DSA\n") == (
        "CUDA error: an illegal memory access"
    )
    assert first_line("") == "" and first_line("   \n ") == ""
    long = "x" * 1000
    assert first_line(long) == "x" * (FIRST_LINE - 1) + "…" and len(first_line(long)) == FIRST_LINE
    assert len(first_line(long, FIRST_LINE_IN_DETAIL)) == FIRST_LINE_IN_DETAIL
    assert first_line("y" * FIRST_LINE) == "y" * FIRST_LINE, "a line that fits is not cut"


def test_a_group_is_named_short_by_its_description_else_its_id() -> None:
    assert group_label("7", "mesh_tp") == "mesh_tp"
    assert group_label("7", None) == "group 7" and group_label("7", "") == "group 7"


def test_a_collective_is_in_flight_while_issued_and_not_completed() -> None:
    assert in_flight(group(enqueued=5, completed=4))
    assert not in_flight(group(enqueued=5, completed=5))


def test_the_time_left_to_the_collective_timeout() -> None:
    assert timeout_left(group(5, 4, timeout=600.0), age=100.0) == 500.0
    assert timeout_left(group(5, 4, timeout=600.0), age=700.0) == -100.0, "past it: negative"
    assert timeout_left(group(5, 4, timeout=None), age=100.0) is None


def test_a_library_path_is_shown_from_its_package_and_the_users_own_file_whole() -> None:
    assert short_path("/venv/lib/python3.11/site-packages/torch/_tensor.py") == "torch/_tensor.py"
    assert short_path("/usr/lib/python3/dist-packages/numpy/core.py") == "numpy/core.py"
    assert short_path("/usr/lib/python3.11/socket.py") == "socket.py"
    assert short_path("/home/me/project/train.py") == "/home/me/project/train.py"
    assert short_path("/lib/x86_64-linux-gnu/libc.so.6") == "libc.so.6"


def test_a_table_cells_duration_is_the_words_duration_with_hundredths_under_a_second() -> None:
    for seconds in (1.0, 9.96, 12.4, 59.7, 184.0, 3599.5, 7500.0):
        assert cells.short_duration(seconds) == duration(seconds)
    assert cells.short_duration(0.213) == "0.21s" and cells.short_duration(-3.0) == "0.00s"
    assert cells.short_duration(None) == "-" and cells.short_duration(float("nan")) == "-"
