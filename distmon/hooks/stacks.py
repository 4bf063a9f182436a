"""A thread's Python stack, for showing where a stalled rank is: its training thread's, which
is the main thread under torchrun and a thread of its own under Ray Train."""

from __future__ import annotations

import linecache
import sys
import threading

from distmon.wire import StackFrame

MAX_FRAMES = 30


def thread_stack(ident: int | None = None, limit: int = MAX_FRAMES) -> list[StackFrame]:
    """The innermost ``limit`` frames of thread ``ident`` (``threading.get_ident()``; the main
    thread when None), outermost first; empty for a thread that has ended.

    Walks ``f_back`` by hand: ``traceback.extract_stack`` also builds a ``FrameSummary`` a frame
    and stats every source file (``linecache.checkcache``), at every report of a stalled rank.
    """
    if ident is None:
        ident = threading.main_thread().ident or -1
    frame = sys._current_frames().get(ident)
    frames: list[StackFrame] = []
    while frame is not None and len(frames) < limit:
        code = frame.f_code
        line = frame.f_lineno or 0
        text = linecache.getline(code.co_filename, line).strip() or None
        frames.append(StackFrame(file=code.co_filename, line=line, func=code.co_name, code=text))
        frame = frame.f_back
    frames.reverse()
    return frames
