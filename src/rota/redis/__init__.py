"""Connections from the settings, the floor above the hot path's bytes (:mod:`rota.wire`):
clients (:mod:`.access`), Sentinel and Cluster (:mod:`.sentinel`, :mod:`.topology`), the
replies that mean "not now" (:mod:`.outage`) and how a pool waits them out
(:mod:`.watch`). Only this package and :mod:`rota.wire` import redis-py; imports are
absolute, so ``import redis`` here is still redis-py.
"""
