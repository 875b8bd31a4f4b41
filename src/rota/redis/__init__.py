"""How rota talks to Redis, all of it in this package:

- the hot path's pipelined connection (:mod:`.link`, on the RESP codec of :mod:`.resp`)
  and the one interface the hot path sends through (:mod:`.conn`);
- the redis-py clients for everything else (:mod:`.connection`: URLs and TLS;
  :mod:`.access`: from settings, with ACL credentials and what a refusal means);
- topologies (:mod:`.topology`: Cluster, and the URL forms; :mod:`.sentinel`: the primary
  a Sentinel names, followed the moment it changes);
- bad days (:mod:`.outage`: the replies that mean "not now", and rota's errors for
  redis-py's; :mod:`.watch`: how a pool's tasks wait them out);
- the names of redis-py the rest of rota may use (:mod:`.redispy`): only this package
  imports redis-py.

Inside this package ``import redis`` is still redis-py: imports are absolute.
"""
