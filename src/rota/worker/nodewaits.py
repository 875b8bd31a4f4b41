"""One waiting connection per cluster node for the shards of a pool on that node.

A cluster refuses a ``BLPOP`` over lists of several slots, so a pool over K shards that
waited on each shard's wake lists with a ``BLPOP`` of its own held K / N blocked
connections per node, and each timed out every ``wake_timeout`` with a fetch behind it:
an idle pool's commands grew with K. Here the pool holds one pub/sub connection per node
instead, subscribed (``SSUBSCRIBE``, Redis 7 and Valkey) to the shard channels named as
the wake lists of the shards that node serves. A script that pushes a token into an
empty wake list also publishes on that channel (``SPUBLISH``, allowed in the script's
own slot: see ``_wake.lua``); the pool then takes the token with ``LMPOP``, so that one
token still wakes one pool, and its fetcher fetches. The tokens stay the truth, the
channel only says when to look:

- a member looks (``LMPOP``) before it waits, so it waits only while its lists are
  empty, and the next push, into an empty list, rings;
- a subscription made again (a node lost, a slot moved: the node says ``sunsubscribe``)
  rings every member of the node, which then looks for what came meanwhile;
- a producer that pushes a token but does not publish (plain commands, another
  language, an older rota) is served within ``wake_timeout``, as one that pushes no
  token was before: the pool's one look a node (rota.worker.nodelook, at least once a
  ``wake_timeout``, the call that answers the heartbeats and the rebalancer too) reads
  the ready sets of its members, and a member whose set is not empty ends its wait and
  fetches. Where a node refuses the look (no functions, an ACL without ``FCALL_RO``, a
  moved slot) or errs, each of its members whose full wait passes ``wake_timeout``
  with nothing heard reads its own ready set (``EXISTS``) instead, as before the look.
  A pool of one shard has no such look: its node's subscription reads the ready set
  itself, one ``EXISTS`` a ``wake_timeout``.

The schedulers of those shards are woken the same way (their channel is named as
``{ns}:schedwake``) and otherwise tick on their own timer, every ``scheduler_interval``.

Where a node refuses ``SSUBSCRIBE`` (Redis 6.2, or an ACL without it) the fetchers and
schedulers wait apart as before: each fetcher's own ``BLPOP`` with its fetch behind it,
and a listener per scheduler.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from rota.protocol import read_calls
from rota.redis.outage import REDIS_ERRORS, condition
from rota.redis.topology import moved, node_client, slot_owner
from rota.wire.redispy import NoPermissionError, ReplyError
from rota.worker.nodelook import READY, NodeLook
from rota.worker.scheduler import Scheduler, listen_for_schedulers

if TYPE_CHECKING:
    from rota.worker.fetcher import Fetcher

__all__ = ["NodeWakes"]

log = structlog.get_logger("rota.pool")

#: Seconds before subscribing again after a slot moved, and before the first new try
#: on a node lost (doubled on each try after, up to AGAIN_UNLOCATED).
AGAIN = 0.5
#: Seconds before trying again to locate a member no node named.
AGAIN_UNLOCATED = 5.0


class NodeWakes:
    """The wake channels of a pool's shards in a cluster, one subscription per node."""

    def __init__(
        self,
        fetchers: Sequence[Fetcher],
        schedulers: Sequence[Scheduler],
        look: NodeLook | None = None,
    ) -> None:
        self.fetchers = {f.shard: f for f in fetchers}
        #: The pool's look over its shards, one a node (None: over one shard, each
        #: node's subscription reads its members' ready sets itself: :meth:`_safety`).
        self.look = look
        if look is not None:
            look.listen(self._looked)
        self.schedulers = {s.rt.position: s for s in schedulers}
        self._keys = {f.shard: list(f.wake_keys) for f in fetchers}
        #: Channel -> (member, whether it is the scheduler's).
        self._channels: dict[str, tuple[int, bool]] = {}
        for f in fetchers:
            self._channels.update(dict.fromkeys(self._keys[f.shard], (f.shard, False)))
            self._channels[f.rt.keys.sched_wake] = (f.shard, True)
        self._waiting: dict[int, asyncio.Future[bool]] = {}
        self._rung: dict[int, int] = defaultdict(int)  # rings so far, per member
        #: Nudges so far, per member: one that comes while the member looks (its LMPOP
        #: under way, no waiter yet) ends the wait that follows.
        self._nudged: dict[int, int] = defaultdict(int)
        self._refused: str | None = None  # why a node refused SSUBSCRIBE
        #: The members whose ready set the last safety look of their node read: their
        #: full waits time out with no command of their own (see :meth:`_safety`).
        self.covered: set[int] = set()
        #: The safety looks sent so far (one a node a ``wake_timeout``).
        self.looks = 0
        #: The nodes subscribed now, as ``host:port`` -> their members.
        self.nodes: dict[str, list[int]] = {}

    @property
    def waiting(self) -> set[int]:
        """The members waiting now."""
        return {member for member, waiter in self._waiting.items() if not waiter.done()}

    async def wait(self, member: int, within: float) -> None:
        """Return once ``member`` took a token from its wake lists, or was nudged, or
        after ``within`` seconds when that is shorter than ``wake_timeout``; a full wait
        goes on past it while the member's ready set is empty (see the module)."""
        rt = self.fetchers[member].rt
        full = within >= rt.settings.wake_timeout
        deadline = anyio.current_time() + within
        look = True  # at the start, and after each ring; not after a timeout
        nudged = self._nudged[member]
        while True:
            rung = self._rung[member]
            if look and await self._take(member):
                return
            if self._nudged[member] != nudged:
                return  # nudged while it looked (or told to wait apart)
            if self._rung[member] != rung:
                continue  # a ring came while it looked: look again
            look = True
            waiter = asyncio.get_running_loop().create_future()
            self._waiting[member] = waiter
            try:
                with anyio.move_on_after(deadline - anyio.current_time()):
                    if not await waiter:
                        return  # nudged, or to wait apart from now on
                    continue  # rung: take the token
            finally:
                if self._waiting.get(member) is waiter:
                    del self._waiting[member]
            if not full:
                return
            if member not in self.covered and await rt.redis.exists(rt.keys.ready):
                return
            deadline = anyio.current_time() + rt.settings.wake_timeout
            look = False

    async def _take(self, member: int) -> bool:
        """Whether a token was in one of ``member``'s wake lists (it is taken)."""
        keys = self._keys[member]
        if not keys:
            return False
        rt = self.fetchers[member].rt
        lmpop = rt.redis.execute_command("LMPOP", len(keys), *keys, "LEFT")  # type: ignore[no-untyped-call]
        return await lmpop is not None

    def nudge(self, member: int) -> None:
        """End ``member``'s wait now, as a token would."""
        self._nudged[member] += 1
        waiter = self._waiting.get(member)
        if waiter is not None and not waiter.done():
            waiter.set_result(False)

    def _ring(self, member: int, scheduler: bool = False) -> None:
        """A channel of ``member`` rang (or may have: its subscription is new)."""
        if scheduler:
            if (s := self.schedulers.get(member)) is not None:
                s.wake()
            return
        self._rung[member] += 1
        waiter = self._waiting.get(member)
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    def drop(self, member: int) -> None:
        """Wait no more for ``member`` (the pool retired its shard)."""
        self.schedulers.pop(member, None)
        self._keys[member] = []
        self._channels = {c: owner for c, owner in self._channels.items() if owner[0] != member}
        self.nudge(member)

    async def run(self) -> None:
        """Subscribe on every node, and again whenever a node or a slot is lost."""
        while self._refused is None:
            await self._subscribe_all()
            self.nodes = {}
            if self._refused is None:
                await anyio.sleep(AGAIN)
        log.warning("wake channels refused: each shard waits on its own", reason=self._refused)
        for fetcher in self.fetchers.values():
            fetcher.shared = None  # its next wait is its own BLPOP, with its fetch behind
            self.nudge(fetcher.shard)
        async with anyio.create_task_group() as tg:
            for s in self.schedulers.values():
                tg.start_soon(listen_for_schedulers, s.rt, [s])

    async def _subscribe_all(self) -> None:
        """One subscription per node that serves a member; returns when the members'
        nodes changed (a slot moved, a replica took over) or a node refused."""
        members = [m for m, keys in self._keys.items() if keys or m in self.schedulers]
        owners = await asyncio.gather(*(_owner(self.fetchers[m]) for m in members))
        nodes: dict[tuple[str, int], list[int]] = defaultdict(list)
        for member, owner in zip(members, owners, strict=True):
            if owner is not None:
                nodes[owner].append(member)
        async with anyio.create_task_group() as tg:
            if None in owners:
                # A member not located: it waits on its timeout until the next try.
                tg.start_soon(_cancel_after, AGAIN_UNLOCATED, tg.cancel_scope)
            for node, on_node in nodes.items():
                tg.start_soon(self._node, node, on_node, tg.cancel_scope)

    async def _node(self, node: tuple[str, int], members: list[int], every: Any) -> None:
        """Keep a subscription on ``node``: a node lost is tried again alone while it
        still serves the same members; anything else ends ``every`` subscription."""
        delay = AGAIN
        while await self._listen(node, members) and self._refused is None:
            await anyio.sleep(delay)
            delay = min(2 * delay, AGAIN_UNLOCATED)
            owners = await asyncio.gather(*(_owner(self.fetchers[m]) for m in members))
            if any(owner not in (node, None) for owner in owners):
                break
        every.cancel()

    def _channels_of(self, member: int) -> list[str]:
        return [c for c, owner in self._channels.items() if owner[0] == member]

    async def _listen(self, node: tuple[str, int], members: list[int]) -> bool:
        """Subscribe on ``node`` to its members' channels and ring them as messages
        come, until the subscription ends: True when the node was lost (not a slot
        moved, not a refusal)."""
        where = "{}:{}".format(*node)
        client = node_client(self.fetchers[members[0]].rt.redis, node)
        pubsub = client.pubsub()
        try:
            expected = 0
            for member in members:
                channels = self._channels_of(member)
                await pubsub.execute_command("SSUBSCRIBE", *channels)
                expected += len(channels)
            ended: Exception | None = None  # raised here, not in the task group's group
            async with anyio.create_task_group() as tg:
                if self.look is None:
                    tg.start_soon(self._safety, members)
                try:
                    await self._messages(pubsub, where, members, expected)
                except Exception as exc:
                    ended = exc
                tg.cancel_scope.cancel()
            if ended is not None:
                raise ended
            return False
        except ReplyError as exc:
            if moved(exc):
                return False  # located before the slot moved: locate again
            if isinstance(exc, NoPermissionError) or "unknown command" in str(exc).lower():
                self._refused = str(exc)
                return False
            return True
        except Exception as exc:
            # The node lost (uvloop's write on a closed connection is a RuntimeError).
            if isinstance(exc, REDIS_ERRORS) or condition(exc) is not None:
                return True
            raise
        finally:
            self.nodes.pop(where, None)
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await pubsub.aclose()  # type: ignore[no-untyped-call]
                await client.aclose()

    def _looked(self) -> None:
        """The pool's look answered (see rota.worker.nodelook): each member whose node
        answered is covered, and nudged when its ready set holds a name; the others
        read their own ready set at their timeouts until their node answers again."""
        look = self.look
        assert look is not None
        for member, fetcher in self.fetchers.items():
            holds = look.holds(fetcher.rt, READY) if self._keys[member] else None
            if holds is None:
                self.covered.discard(member)
                continue
            self.covered.add(member)
            if holds:
                self.nudge(member)
        self.looks = look.looks

    async def _safety(self, members: list[int]) -> None:
        """The safety net of ``members`` (the shards of one node) for producers that do
        not ring: every ``wake_timeout`` one read-only function ``look`` over their
        ready sets (one command a node, however many shards it serves; a node of one
        shard reads its set with ``EXISTS``, one inner command less), and each member
        whose set holds a name ends its wait and fetches, as its own ``EXISTS`` at its
        timeout did. While it answers, the members' full waits send nothing of their own
        (:attr:`covered`); a node that refuses it (no functions, an ACL without
        ``FCALL_RO``, a slot moved) leaves them to their own ``EXISTS`` at each timeout,
        as before, until the node's next subscription; one that errs, until it answers
        again."""
        try:
            while True:
                live = [m for m in members if self._keys[m]]
                if not live:
                    return
                rt = self.fetchers[live[0]].rt
                keys = [[self.fetchers[m].rt.keys.ready] for m in live]
                found: list[bool] | None
                try:
                    if len(live) == 1:  # one shard: its EXISTS, one command less
                        found = [bool(await rt.redis.exists(rt.keys.ready))]
                    else:
                        found = await read_calls.look_each(rt.shard.scope, keys)
                except Exception as exc:
                    if not isinstance(exc, REDIS_ERRORS) and condition(exc) is None:
                        raise
                    self.covered.difference_update(members)  # tried again next time
                else:
                    if found is None:
                        return  # refused: each member's own EXISTS (see finally)
                    self.looks += 1
                    self.covered.update(live)
                    for member, holds in zip(live, found, strict=False):
                        if holds:
                            self.nudge(member)
                await anyio.sleep(rt.settings.wake_timeout)
        finally:
            self.covered.difference_update(members)

    async def _messages(self, pubsub: Any, node: str, members: list[int], expected: int) -> None:
        """Ring the members as their channels ring, once every subscription is
        confirmed (each member once then: what came before it); return when the node
        drops a subscription (``sunsubscribe``: a slot moved)."""
        while True:
            message: Any = await pubsub.get_message(timeout=None)
            kind = None if message is None else message["type"]
            if kind == "ssubscribe":
                expected -= 1
                if expected == 0:
                    self.nodes[node] = members
                    for member in members:
                        self._ring(member)
                        self._ring(member, scheduler=True)
            elif kind == "smessage":
                owner = self._channels.get(message["channel"].decode())
                if owner is not None:
                    self._ring(*owner)
            elif kind == "sunsubscribe":
                return


async def _owner(fetcher: Fetcher) -> tuple[str, int] | None:
    """The node that serves ``fetcher``'s shard (None: no node says so now)."""
    return await slot_owner(fetcher.rt.redis)


async def _cancel_after(delay: float, scope: anyio.CancelScope) -> None:
    await anyio.sleep(delay)
    scope.cancel()
