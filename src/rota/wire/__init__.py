"""The hot path's bytes: the RESP link (:mod:`.link`, on :mod:`.resp`), the one interface
the hot path sends through (:mod:`.conn`), and the names of redis-py the rest of rota may
use (:mod:`.redispy`). Settings and topologies are the floor above, :mod:`rota.redis`."""
