"""The watch side's core: take the ranks' reports in, keep the job's state, judge it, record it,
and feed the screens attached to it. Layered broadcast > session, overview > monitor, intake >
rules, viewing > outside, recording > state (see docs/architecture.md); imports the wire, the
channel and the small shared modules, never torch."""
