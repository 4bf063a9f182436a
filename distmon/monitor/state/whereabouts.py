"""Where a stalled rank is, in words: its stack classified, the user's own frame first
(:func:`distmon.monitor.state.words.rank_lines` puts it into an alert's evidence).

The person reading an alert did not write PyTorch: "waiting for a DataLoader batch, in your
code at train.py:95, worker 1 (pid 4242) owes it and is in dataset.py:31 reading a file"
tells them what to do; four frames of ``selectors.py`` do not.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from distmon.monitor.state.kinds import Doing
from distmon.node.torch_frames import c10d_op, in_backward, in_dataloader, in_init, p2p_frames
from distmon.wire import StackFrame

LIBRARY = ("/site-packages/", "/dist-packages/", "/lib/python3", "<frozen", "/distmon/hooks/")
"""Path parts of frames that are not the user's: installed packages, the standard library."""
IO_PATHS = ("torch/serialization.py", "torch/distributed/checkpoint/", "safetensors", "h5py", "/shutil.py")
IO_NATIVE = re.compile(r"^(__libc_|__GI___libc_)?(p?read|p?write|open|open64|fsync|fdatasync|stat|statx|getdents)")
IO_CODE = re.compile(r"\b(open|read|readinto|write|load|save|listdir|scandir|stat|fsync|copyfile)\(")
PIPELINES = {
    "torch/distributed/pipelining/": "torch.distributed.pipelining",
    "megatron/": "Megatron",
    "deepspeed/": "DeepSpeed",
}
LOCK_PATHS = ("/threading.py", "/queue.py", "multiprocessing/synchronize.py", "multiprocessing/queues.py", "/futures/")


@dataclass(frozen=True)
class Place:
    kind: Doing
    """One of :data:`~distmon.monitor.state.kinds.PLACES`."""
    words: str
    user: StackFrame | None
    """The user's innermost frame."""

    @property
    def signature(self) -> tuple[str, str, int]:
        """Ranks with equal signatures stand in the same place in the user's code."""
        return (self.kind, self.user.file if self.user else "", self.user.line if self.user else 0)


def is_library(frame: StackFrame) -> bool:
    return not frame.file.endswith(".py") or any(part in frame.file for part in LIBRARY)


def user_frame(frames: list[StackFrame]) -> StackFrame | None:
    return next((f for f in reversed(frames) if not is_library(f)), None)


def classify(frames: list[StackFrame] | None, owns_gil: bool = False) -> Place:
    """The first matching place, from the most specific to the user's own code."""
    if not frames:
        return Place(Doing.UNKNOWN, "at an unknown place (no stack)", None)
    user = user_frame(frames)
    for kind, test in CHECKS:
        words = test(frames, owns_gil)
        if words:
            return Place(kind, words, user)
    return Place(Doing.USER, "in its own code", user)


def _gil(frames: list[StackFrame], owns_gil: bool) -> str | None:
    inner = frames[-1]
    if owns_gil and not inner.file.endswith(".py"):
        return f"holding the GIL in a native call ({inner.func} in {short_path(inner.file)})"
    return None


def _dataloader(frames: list[StackFrame], _gil: bool) -> str | None:
    return "waiting for a DataLoader batch" if in_dataloader(frames) else None


def _init(frames: list[StackFrame], _gil: bool) -> str | None:
    return "in init_process_group (rendezvous: waiting for every rank to join)" if in_init(frames) else None


def _p2p(frames: list[StackFrame], _gil: bool) -> str | None:
    ops = p2p_frames(frames)
    if not ops:
        return None
    library = next((name for part, name in PIPELINES.items() for f in frames if part in f.file), None)
    return f"in a pipeline send/recv ({library})" if library else f"in a point-to-point {ops[-1].func}"


def _collective(frames: list[StackFrame], _gil: bool) -> str | None:
    op = c10d_op(frames)
    if op:
        return f"in a collective ({op})"
    if in_backward(frames):
        return "in backward (with DDP: the gradient all-reduce)"
    return None


def _cuda(frames: list[StackFrame], _gil: bool) -> str | None:
    if any(f.func == "synchronize" and "torch/cuda/" in f.file for f in frames):
        return "in a CUDA synchronize (waiting for the GPU)"
    return None


def _io(frames: list[StackFrame], _gil: bool) -> str | None:
    inner = frames[-1]
    if any(part in f.file for f in frames for part in IO_PATHS) or IO_NATIVE.match(inner.func):
        return "in checkpoint or file I/O"
    user = user_frame(frames)
    if user is not None and user is inner and user.code and IO_CODE.search(user.code):
        return "in file I/O"
    return None


def _sleep(frames: list[StackFrame], _gil: bool) -> str | None:
    inner = frames[-1]
    if (inner.code and "sleep(" in inner.code) or "nanosleep" in inner.func:
        return "sleeping"
    return None


def _lock(frames: list[StackFrame], _gil: bool) -> str | None:
    # py-spy prints a path shortened to its sys.path entry: the standard library's ``threading.py``
    if any(part in f.file or f.file.startswith(part.lstrip("/")) for f in frames[-3:] for part in LOCK_PATHS):
        return "waiting on a lock, a queue or a thread"
    return None


CHECKS: list[tuple[Doing, Callable[[list[StackFrame], bool], str | None]]] = [
    (Doing.GIL, _gil),
    (Doing.DATALOADER, _dataloader),
    (Doing.INIT, _init),
    (Doing.P2P, _p2p),
    (Doing.COLLECTIVE, _collective),
    (Doing.CUDA, _cuda),
    (Doing.FILE_IO, _io),
    (Doing.SLEEPING, _sleep),
    (Doing.LOCK, _lock),
]


def frame_lines(frames: list[StackFrame] | None, depth: int = 4, indent: str = "    ") -> list[str]:
    """The user's innermost frame first, then the library frames it called, innermost last."""
    if not frames:
        return [f"{indent}(no stack)"]
    user = user_frame(frames)
    lines = []
    inner = frames
    if user is not None:
        lines.append(f"{indent}your code: {user.file}:{user.line} in {user.func}")
        if user.code:
            lines.append(f"{indent}    {user.code}")
        inner = frames[len(frames) - frames[::-1].index(user) :]
    shown = inner[-depth:]
    if shown:
        more = f", {len(inner) - len(shown)} more above" if len(inner) > len(shown) else ""
        lines.append(f"{indent}{'inside' if user else 'in'} (innermost last{more}):")
        lines.extend(f"{indent}  {_place(f)}" for f in shown)
    return lines


def _place(f: StackFrame) -> str:
    """A library frame in one line; a native one has no line number."""
    return f"{short_path(f.file)}:{f.line} in {f.func}" if f.line else f"{f.func} ({short_path(f.file)})"


def short_path(path: str) -> str:
    """A library path from its package on: ``torch/utils/data/dataloader.py``; the user's own
    ``.py`` files whole (where the culprit is in their code); a native library by its name."""
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    match = re.search(r"/lib/python3\.\d+/(.*)", path)
    if match:
        return match.group(1)
    return path.rsplit("/", 1)[-1] if not path.endswith(".py") else path
