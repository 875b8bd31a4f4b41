"""Redis connections from a URL: :func:`rota.redis.access.connect`."""

from rota.redis.access import connect
from rota.redis.outage import tls_refused

__all__ = ["connect", "tls_refused"]
