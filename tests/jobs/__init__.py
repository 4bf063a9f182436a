"""Tests with real parts over seconds: torchrun jobs on gloo, rank processes with the hook,
`distmon` processes on real sockets, real processes seen from outside."""
