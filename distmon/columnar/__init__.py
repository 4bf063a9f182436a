"""Rank reports as arrays, for whoever takes in many at once: a batch of frames read as
arrays (:mod:`~distmon.columnar.frames`), and the columnar batch a relay sends the monitor
(:mod:`~distmon.columnar.batch`): its ranks' numbers as columns, their reports only when
they say something new. Shared by the relays (which build the batches) and the monitor
(which takes them in); imports only :mod:`distmon.link` and :mod:`distmon.wire` below it,
and numpy, which the rank side never needs."""
