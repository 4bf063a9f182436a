"""distmon: a live monitor for distributed PyTorch jobs.

The package splits by where code runs:

- ``distmon.hooks``: the rank side, inside each training process (imports torch).
- ``distmon.wire``: the message schema both sides share.
- ``distmon.monitor``: receiving, detecting and recording, on any machine (no torch).
- ``distmon.tui``: the terminal UI over the monitor (no torch).
- ``distmon.cli``: the ``distmon`` command.
"""

__version__ = "0.1.0"
