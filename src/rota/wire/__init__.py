"""The hot path's bytes: the RESP link (:mod:`.link` on the codec of :mod:`.resp`), the
one interface the hot path sends through (:mod:`.conn`), and the names of redis-py the
rest of rota may use (:mod:`.redispy`). Nothing here knows settings or topologies: that
is :mod:`rota.redis`, the floor above.
"""
