"""One map of a cluster's slots, shared by every :class:`~rota.redis.topology.SlotOwnerPool`
of this process over that cluster (same seed nodes, same credentials).

One ``CLUSTER SLOTS`` reply names the owner of every slot, so a pool over many shards
(one slot each) needs one ask, not one per shard: asking each node once per shard and
second cost K·N asks on a cluster of N primaries, enough on 100 shards over 100 nodes to
block the event loop for seconds, time asks out and tear every node wait down.

The map is trusted for :data:`OWNER_TTL` after it was asked; a pool that locates then
reads it. Locates that find it stale or without their slot share the one ask in flight
(an asyncio task, shielded: a cancelled locate does not cancel the others' ask). That
ask tries the node that answered last first, on a short connection of its own (no
redis-py client: no pool, no ``CLIENT SETINFO``), and asks every other known node at
once only when it cannot answer or its answer still names an owner found unreachable
(a replica that took over is named by some node before gossip has told every node): an
answer naming no such owner wins, else any answer (that owner came back). A ``MOVED``
reply places its slot on the node it names, without asking; a lost owner makes the map
stale, so the next locate asks, once.
"""

from __future__ import annotations

import asyncio
import bisect
import time
import weakref
from typing import Any, Final

import redis.exceptions as errors
from redis.asyncio.connection import Connection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from rota.protocol.shards import SLOTS

__all__ = ["OWNER_TTL", "SlotMap", "slot_map"]

OWNER_TTL: Final = 1.0  # seconds a map is trusted without asking again
_ASK_TIMEOUT: Final = 2.0  # seconds an unreachable node is waited for, at most

Node = tuple[str, int]
_maps: weakref.WeakValueDictionary[tuple[Any, ...], SlotMap] = weakref.WeakValueDictionary()


def slot_map(seeds: tuple[Node, ...], options: dict[str, Any]) -> SlotMap:
    """The map of the cluster of ``seeds`` as seen with ``options``' credentials, shared
    while any pool holds it."""
    key = (tuple(seeds), options.get("username"), options.get("password"))
    found = _maps.get(key)
    if found is None:
        found = _maps[key] = SlotMap(seeds, options)
    return found


class SlotMap:
    """The owners of a cluster's slots as one node last said; see the module's docstring."""

    def __init__(self, seeds: tuple[Node, ...], options: dict[str, Any]) -> None:
        self.nodes: list[Node] = list(seeds)  # the seeds and every node a reply named since
        self.asks = 0  # CLUSTER SLOTS sent, for tests and measures
        self._options = options
        self._starts: list[int] = []  # sorted first slots of the ranges
        self._ranges: list[tuple[int, int, Node]] = []
        self._asked = -OWNER_TTL  # monotonic time of the answer the map holds
        self._lost: set[Node] = set()  # owners found unreachable, not since named by all
        self._last: Node | None = None  # the node that answered last
        self._asking: asyncio.Task[None] | None = None
        self._moved: dict[int, Node] = {}  # slots a MOVED reply placed since the answer

    def owner(self, slot: int) -> Node | None:
        """The primary of ``slot`` as the map says, stale or not (None: no range)."""
        if slot in self._moved:
            return self._moved[slot]
        i = bisect.bisect_right(self._starts, slot) - 1
        if i >= 0 and self._ranges[i][0] <= slot <= self._ranges[i][1]:
            return self._ranges[i][2]
        return None

    def stale(self) -> None:
        """The map is wrong somewhere: the next locate asks again."""
        self._asked = -OWNER_TTL

    def moved(self, slot: int, where: Node) -> None:
        """A node answered ``MOVED slot where``: the map says so until the next answer,
        which may be a node's that gossip has not told yet (then ``MOVED`` again)."""
        self._moved[slot] = where

    def lost(self, where: Node) -> None:
        """A connection to ``where`` failed: if the map names it owner of a slot, the next
        locate asks again, preferring an answer that names another owner."""
        if any(owner == where for _, _, owner in self._ranges):
            self._lost.add(where)
            self.stale()

    async def locate(self, slot: int) -> Node:
        """The primary of ``slot``: from the map while it is fresh, else asked (once for
        every locate waiting at the same time)."""
        owner = self.owner(slot)
        if owner is not None and time.monotonic() - self._asked < OWNER_TTL:
            return owner
        task = self._asking
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            task = self._asking = asyncio.ensure_future(self._ask())
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
        await asyncio.shield(task)  # raises when no node answered
        owner = self.owner(slot)
        if owner is not None:
            return owner
        raise errors.ConnectionError(f"no cluster node names the owner of slot {slot}")

    async def _ask(self) -> None:
        """Fill the map from the node that answered last, or from every known node."""
        problems: list[str] = []
        first = self._last if self._last is not None and self._last not in self._lost else None
        first = first or next((n for n in self.nodes if n not in self._lost), self.nodes[0])
        answer = await self._ask_node(first, problems)
        if answer is None or self._names_lost(answer):
            rest = [n for n in list(self.nodes) if n != first]
            more = await asyncio.gather(*(self._ask_node(n, problems) for n in rest))
            answers = [a for a in (answer, *more) if a is not None]
            if not answers:
                raise errors.ConnectionError(
                    "no cluster node answers CLUSTER SLOTS: " + "; ".join(problems)
                )
            answer = next((a for a in answers if not self._names_lost(a)), answers[0])
            if self._names_lost(answer):  # every node names it: it came back
                self._lost.clear()
        ranges = sorted(answer[1])
        self._ranges, self._starts, self._moved = ranges, [r[0] for r in ranges], {}
        self._last, self._asked = answer[0], time.monotonic()

    def _names_lost(self, answer: tuple[Node, list[tuple[int, int, Node]]]) -> bool:
        return any(owner in self._lost for _, _, owner in answer[1])

    async def _ask_node(
        self, node: Node, problems: list[str]
    ) -> tuple[Node, list[tuple[int, int, Node]]] | None:
        """The slot ranges and their primaries as ``node`` says (``CLUSTER SLOTS``, which
        6.2 to 8 answer), learning the nodes it names; None when it cannot say."""
        host, port = node
        kw = self._options
        conn = Connection(
            host=host,
            port=port,
            username=kw.get("username"),
            password=kw.get("password"),
            socket_connect_timeout=min(_ASK_TIMEOUT, kw.get("socket_connect_timeout") or 2.0),
            socket_timeout=min(_ASK_TIMEOUT, kw.get("socket_timeout") or 2.0),
            retry=Retry(NoBackoff(), 0),
            driver_info=None,  # no CLIENT SETINFO
        )
        self.asks += 1
        try:
            await conn.connect()  # type: ignore[no-untyped-call]
            await conn.send_command("CLUSTER", "SLOTS")
            reply = await conn.read_response()
        except (OSError, errors.ConnectionError, errors.TimeoutError, errors.ResponseError) as exc:
            problems.append(f"{host}:{port}: {exc}")
            return None
        finally:
            await conn.disconnect()
        try:
            ranges, named = _parsed(reply, host)
        except (TypeError, ValueError, IndexError) as exc:
            problems.append(f"{host}:{port}: CLUSTER SLOTS reply unreadable: {exc!r}"[:300])
            return None
        self.nodes += [n for n in dict.fromkeys(named) if n not in self.nodes]
        if not ranges:
            problems.append(f"{host}:{port}: no node serves a slot")
            return None
        return node, ranges


def _parsed(reply: Any, host: str) -> tuple[list[tuple[int, int, Node]], list[Node]]:
    """The slot ranges and their primaries of a ``CLUSTER SLOTS`` reply, and every node
    it names; a TypeError, ValueError or IndexError for a reply that is not one (a proxy
    or a node gone wrong answers anything): that node cannot say, the others are asked."""
    ranges: list[tuple[int, int, Node]] = []
    named: list[Node] = []
    for start, end, primary, *replicas in reply:
        for entry in (primary, *replicas):
            named.append((_text(entry[0]) or host, int(entry[1])))
        first, last = int(start), int(end)
        if not 0 <= first <= last < SLOTS:
            raise ValueError(f"no slot range: {first}-{last}")
        ranges.append((first, last, (_text(primary[0]) or host, int(primary[1]))))
    return ranges, named


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
