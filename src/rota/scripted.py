"""What the parts of a :class:`rota.Client` that call rota's scripts share: the
connection, the namespace's keys, and the :class:`~rota.protocol.calls.Scope` its script
calls run in (see :mod:`rota.protocol.calls`).
"""

from __future__ import annotations

from rota.protocol.calls import Scope
from rota.protocol.keys import Keys
from rota.wire.conn import Conn
from rota.wire.redispy import Redis

__all__ = ["Scripted"]


class Scripted:
    """A base of :class:`rota.Client`'s parts (:class:`rota.reads.Reads`,
    :class:`rota.operations.Operations`); the client provides the attributes."""

    redis: Redis
    #: The bare connection when there is one (cheap for thousands of commands at once).
    conn: Conn
    keys: Keys
    scope: Scope
