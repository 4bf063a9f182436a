"""distmon: a live monitor for distributed PyTorch jobs.

The package splits by where code runs:

- in each training process (imports torch): ``distmon.hooks``, the rank side;
  ``distmon.integrations``, framework callbacks over it; ``distmon.launch``, what ``distmon
  run`` puts in every rank.
- on any machine, never torch: ``distmon.monitor``, taking reports in, judging, recording
  and feeding screens; ``distmon.tui``, the terminal UI over it; ``distmon.export``,
  ``distmon.actions`` and ``distmon.forensics``, what reads the monitor or acts on it.
- on each node: ``distmon.node.relay``, a node's relay.
- shared: ``distmon.wire`` (a rank's message), ``distmon.wire.sockets`` (batches and commands),
  and the small modules (the Flight Recorder reader, py-spy's wrapper, endpoints, keys).
- ``distmon.cli`` and ``distmon.commands``: the ``distmon`` command; ``distmon.doctor``, its
  checks before a job starts.

Each layer imports only those below it (``pyproject.toml``'s import-linter contracts, drawn in
docs/architecture.md).
"""

__version__ = "0.1.0"
