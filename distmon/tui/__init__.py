"""The terminal UI (Textual) of ``distmon watch`` and ``distmon replay``; build it with
:func:`distmon.tui.app.build_app`."""
