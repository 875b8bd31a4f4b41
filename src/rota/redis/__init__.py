"""Connections from the settings, the floor above the hot path's bytes (:mod:`rota.wire`):

- the redis-py clients (:mod:`.access`: for a URL or from the settings, with TLS files
  and ACL credentials, and why one failed);
- topologies (:mod:`.topology`: Cluster; :mod:`.sentinel`: the primary a Sentinel
  names, followed the moment it changes); the URL forms are data, :mod:`rota.urls`;
- bad days (:mod:`.outage`: the replies that mean "not now", and rota's errors for
  redis-py's; :mod:`.watch`: how a pool's tasks wait them out).

Only this package and :mod:`rota.wire` import redis-py. Inside this package ``import
redis`` is still redis-py: imports are absolute.
"""
