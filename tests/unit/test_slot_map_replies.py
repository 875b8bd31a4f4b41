"""A ``CLUSTER SLOTS`` reply that is no slot map (a proxy or a broken node answers
anything) makes the node one that cannot say, as a refused connection does: the locate
fails with a ConnectionError naming the node, which a pool rides out as a Redis away,
never with a TypeError or ValueError that would end it. A node that answers well is
still read.

The node here is a socket that answers every command with one fixed RESP reply: what a
real server never sends is the point."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import redis.exceptions as errors

from rota.redis.slotmap import SlotMap


@asynccontextmanager
async def answering(reply: bytes) -> AsyncIterator[tuple[str, int]]:
    """A node on 127.0.0.1 that answers each command it reads with ``reply``."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(4096):
            writer.write(reply)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield "127.0.0.1", server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


GARBAGE = [
    b"*1\r\n:5\r\n",  # a range that is a number
    b"*1\r\n*3\r\n:0\r\n:16383\r\n:7\r\n",  # a primary that is a number
    b"*1\r\n*3\r\n$1\r\nx\r\n:16383\r\n*2\r\n$1\r\nh\r\n:1\r\n",  # a slot that is no number
    b"*1\r\n*3\r\n:0\r\n:99999\r\n*2\r\n$1\r\nh\r\n:1\r\n",  # no slot range
    b"*1\r\n*2\r\n:0\r\n:16383\r\n",  # a range without its primary
    b":3\r\n",  # no array
]


@pytest.mark.parametrize("reply", GARBAGE)
async def test_a_garbled_slots_reply_reads_as_a_node_that_cannot_say(reply: bytes) -> None:
    async with answering(reply) as (host, port):
        with pytest.raises(errors.ConnectionError, match=f"{host}:{port}"):
            await SlotMap(((host, port),), {}).locate(0)


async def test_a_sound_slots_reply_still_names_the_owner() -> None:
    reply = b"*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.9\r\n:7001\r\n"
    async with answering(reply) as (host, port):
        found = SlotMap(((host, port),), {})
        assert await found.locate(42) == ("127.0.0.9", 7001)
        assert ("127.0.0.9", 7001) in found.nodes
