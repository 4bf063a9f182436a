"""The terminal UI (Textual) of ``distmon watch`` and ``distmon replay``; build it with
:func:`distmon.tui.app.build_app`. It formats the monitor's facts (session, overview, state),
never computes them, and never imports torch."""
