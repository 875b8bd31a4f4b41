"""How rota talks to Redis: the hot path's pipelined connection (:mod:`.link`, on the
RESP codec of :mod:`.resp`) and the redis-py clients for everything else
(:mod:`.connection`: URLs, TLS, Sentinel and Cluster).

Inside this package ``import redis`` is still redis-py: imports are absolute.
"""
