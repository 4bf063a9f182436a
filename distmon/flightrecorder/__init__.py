"""PyTorch's Flight Recorder dumps, read: the one reader of the live hook and of ``distmon analyze``.

A dump (pickle or JSON, torch 2.5 on) is a dict: ``pg_config`` keyed by group *name* (with
the group's global ``ranks``), ``pg_status`` keyed by the group's *local* id on this rank
(``pg_id``: the same id names different groups on different ranks), and ``entries``, the
ring of recent work, oldest first, each carrying both ``pg_id`` and ``process_group =
(name, desc)``. So ids are named through the entries. Older dumps are read as this one: torch 2.3's (one
``seq_id`` for a group's collectives and sends together, no ``pg_status``) and torch 2.2's, its entries alone
(a list, stating no group but by its id on this rank, nor a timeout).

A dump written by another machine is data, never code. Reading one takes two steps, a module
each: :mod:`~distmon.flightrecorder.loading` turns its bytes into plain data within bounds (an
unpickler that refuses every class, after a walk of the pickle that builds nothing), and
:mod:`~distmon.flightrecorder.fields` reads that data's fields by type into the wire's records
(a nested structure where a string belongs is taken as absent, never printed). Torch is never
imported: the monitor and ``distmon analyze`` read dumps without it.
"""
