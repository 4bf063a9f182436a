"""The watch side's core: take the ranks' reports in, keep the job's state, judge it, record it.
Layered session > overview > monitor, intake > rules > outside, recording > state (see
docs/architecture.md); imports the wire, the channel and the small shared modules, never torch."""
