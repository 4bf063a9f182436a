"""The watch side's core: take the ranks' reports in, keep the job's state, judge it, record it,
and feed the screens attached to it. Layered attach.serve > session, overview, attach.follow,
attach.feed > pipeline, intake > rules, attach.messages > outside, recording > state (see
docs/architecture.md); imports the wire, the nodes' eyes and the small shared modules, never
torch."""
