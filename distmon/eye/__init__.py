"""A node's eye: its ranks' processes seen from outside, on the node where they run.

What a rank cannot say itself (every thread stopped by SIGSTOP, a native call holding the GIL,
a kernel call that does not return, a process gone) the kernel knows, but only on the rank's
own node. So the eye runs there: in the monitor for its own host, in each node's relay for the
others, the same code in both. It looks at the processes it is asked about (``/proc``:
:mod:`~distmon.eye.proc`, on a thread of its own: :mod:`~distmon.eye.prober`), takes their
stacks from outside when asked (py-spy, else the rank's faulthandler), and hands what it saw
over as :class:`~distmon.eye.looks.Looks`, plain data that travel upstream with the relay's
batches, are recorded, and are replayed: the monitor's rules judge a rank on any node from its
node's looks, by one code path.

Imports the wire, the link and py-spy's wrapper; the monitor and the relay import it.
"""
