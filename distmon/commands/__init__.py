"""One module per ``distmon`` subcommand, each with ``add_arguments(parser)`` and
``run(args) -> exit code``."""
