"""``distmon doctor``: what will go wrong with a job before it starts. It imports ``launch``'s
settings and, in a rank, torch; nothing of the watch side.

Each check is a small function from facts about the machine (or the launch command) to a
:class:`~distmon.doctor.results.Check`: pass, warn or fail, with a concrete fix. The
machine checks run anywhere, torch or not; :mod:`distmon.doctor.collective_smoke` runs inside
each rank under torchrun (``torchrun ... -m distmon.doctor --collectives``).
"""
