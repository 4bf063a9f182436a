"""What runs on each node of the job, beside its ranks: the node's relay and its eye.

The relay (:mod:`~distmon.node.relay`) takes its node's ranks' reports and sends them upstream
as columns (:mod:`~distmon.wire.column_batch`), whole reports only when they say something new
(:mod:`~distmon.node.news`). The eye (:mod:`~distmon.node.eye`) looks at the node's rank
processes from outside, where only the kernel knows what they do (every thread stopped by
SIGSTOP, a native call holding the GIL, a kernel call that does not return, a process gone):
``/proc`` (:mod:`~distmon.node.proc`, on a thread of its own: :mod:`~distmon.node.prober`),
stacks from outside (py-spy, else the rank's faulthandler: :mod:`~distmon.node.pyspy`,
:mod:`~distmon.node.faultstacks`) and the node's network links (:mod:`~distmon.node.links`).
What it saw travels upstream as :class:`~distmon.node.looks.Looks`, plain data that are
recorded and replayed. The monitor's host is a node like any other: the monitor runs an eye
for it, the same code, and its rules judge a rank on any node from its node's looks.

Imports the wire, the endpoint and the keys below it; the monitor, the hooks (the faulthandler
file a rank writes) and the commands import it.
"""
