"""One module per ``distmon`` subcommand, each with ``add_arguments(parser)`` and
``run(args) -> exit code``. The top layer under the CLI: it may import every package below;
the watch side's commands never import torch."""
