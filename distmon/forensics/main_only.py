"""What the main process said it was doing, alone, before its collective timed out: pushing the model to a hub,
saving a checkpoint, evaluating. Libraries announce that work on the main process only (its logger), and a
collective inside it (ZeRO-3 gathering the weights to save them, a metric reduced while evaluating) is one the
other ranks never issue where the script calls it under ``if rank == 0``: rank 0 then waits alone::

    2023-12-01 00:05:43 - INFO - __main__ - Pushing to hub...
    [E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=130722, ...

The last such line before the log's first watchdog line is kept, from rank 0's lines or unlabelled ones (the
main process's logger labels no rank); so is the function of that work rank 0's traceback, cut in a collective,
waits inside (DeepSpeed's ``save_checkpoint``, which every rank must call)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from distmon.guards.text import visible
from distmon.wire.schema import StackFrame

_ANNOUNCED = re.compile(
    r"[Pp]ushing (?:\S{1,60} )?to (?:the )?[Hh]ub|[Uu]ploading (?:\S{1,60} )?to (?:the )?[Hh]ub"
    r"|[Cc]heckpoint \S{1,60} is about to be saved|[Ss]aving (?:the )?(?:model|checkpoint|weights)"
    r"|[Rr]unning [Ee]valuation|[Rr]unning validation|[Ee]valuating\b|[Vv]alidating\b"
)
"""A logger's words as the main process starts work of its own: the hub's upload (transformers, TRL, the
alignment handbook), a save (DeepSpeed's ``Checkpoint 24 is about to be saved!``, ``Saving model checkpoint``), an
evaluation or a validation."""
_WORK = re.compile(
    r"_?save(?:_\w{1,60})?|\w{0,60}(?:save_checkpoint|save_model|push_to_hub)|_?evaluate|evaluation_loop"
    r"|_?validate|(?:run|log)_validation"
)
"""The functions of that work, whichever library: a save, the hub's upload, an evaluation, a validation."""
ONLY_RANK_0 = (
    "work the main process does alone; called under `if rank == 0`, a collective inside it is one the others never "
    "join: call it on every rank, or take the collective out of it"
)
MAX_SAID = 200
"""Characters of the announcing line kept."""


@dataclass
class MainOnly:
    """What the main process said, or its traceback showed, of work of its own before its wait."""

    said: str | None = None
    """Its last announcement of that work before the log's first watchdog line, from the announcing words on."""
    inside: str | None = None
    """The function of that work (and its place) rank 0's traceback waits in a collective inside."""
    timed_out: bool = False
    """The log's first watchdog line has been read: what the main process said after it is not what it waits in."""

    def line(self, body: str, rank: int | None) -> bool:
        """Reads ``body``, a line of ``rank`` (None where no label names one)."""
        if self.timed_out or rank not in (0, None) or (announced := _ANNOUNCED.search(body)) is None:
            return False
        self.said = visible(body[announced.start() :].strip(), MAX_SAID)
        return True

    def waited(self, rank: int | None, frames: list[StackFrame], in_collective: bool) -> None:
        """A traceback cut before its exception line: where rank 0's (or one no label places), cut in a collective,
        passes through work of the main process's own, that work's outermost function."""
        if rank not in (0, None) or not in_collective or self.inside is not None:
            return
        work = next((f for f in frames[:-1] if _WORK.fullmatch(f.func)), None)
        if work is not None:
            self.inside = f"{visible(work.func, 80)} ({visible(os.path.basename(work.file), 80)}:{work.line})"

    def words(self) -> str | None:
        """Why rank 0's wait is in work of its own, in words."""
        if self.inside is not None:
            return f"its traceback waits inside {self.inside}: {ONLY_RANK_0}"
        if self.said is not None:
            return f"the main process's last line before the timeout says `{self.said}`: {ONLY_RANK_0}"
        return None
