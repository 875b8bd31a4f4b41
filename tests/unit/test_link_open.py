"""A connection being opened for a caller that is cancelled (a task group that gave up on
a shard) fails with nobody left to hear it: that failure must not surface as asyncio's
"Task exception was never retrieved" on stderr, where a CLI command promises one line."""

from __future__ import annotations

import asyncio
import gc
import socket
from typing import Any

from rota.wire.link import Link


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_an_open_whose_caller_was_cancelled_leaves_no_unretrieved_error() -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    before = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        go = asyncio.Event()
        port = _closed_port()

        async def locate() -> tuple[str, int]:
            await go.wait()
            return "127.0.0.1", port

        link = Link(locate=locate, socket_connect_timeout=2.0)
        caller = asyncio.create_task(link.execute_command("PING"))
        await asyncio.sleep(0.05)  # the open is under way, waiting on locate
        opening = link._connecting
        assert opening is not None and not opening.done()
        caller.cancel()
        await asyncio.gather(caller, return_exceptions=True)
        go.set()
        await asyncio.wait([opening])  # refused: nobody awaits it any more
        assert opening.done() and not opening.cancelled()  # (its error is not read here)
        del opening, caller, link
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(before)
    assert [c for c in reported if "never retrieved" in str(c.get("message"))] == []
