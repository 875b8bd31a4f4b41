"""Quiet, stop and resume a live pool, or every pool of a host, from the pools page's
forms (a 303 back to the page) or the API (JSON). Carried through Redis (see
:mod:`rota.client.pools`): the pool obeys at once (at its next heartbeat at the latest)
and says so in its state, which the pools page shows. Audited and refused to read-only
credentials as any change."""

from __future__ import annotations

from typing import Annotated

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from rota.client.pools import Command, PoolNotFound, StopIsFinal
from rota.web.base import ApiError, back, client_of
from rota.web.declare import Routes, is_api, said

__all__ = ["Told", "routes"]

routes = Routes()

_WHAT = {
    "quiet": "fetch no more jobs and finish those it runs; it stays alive and says quiet",
    "stop": "drain as on SIGTERM (jobs not done within its grace go back to their queues)"
    " and leave; it says stopping until its heartbeat ends. Final",
    "resume": "fetch again after a quiet",
}


class Told(msgspec.Struct):
    """What a command reached: the pools it was written for (each obeys at its next
    heartbeat, and its state on /api/pools says so)."""

    command: Annotated[str, said("quiet, stop or resume")]
    pools: Annotated[list[str], said("ids of the pools told")]


async def _tell(request: Request, command: Command, **chosen: str) -> Told:
    """404 for no such live pool (or none on the host), 409 for a pool told to stop."""
    try:
        told = await client_of(request).admin.commands.give(command, **chosen)
    except PoolNotFound as exc:
        raise ApiError(404, str(exc)) from None
    except StopIsFinal as exc:
        raise ApiError(409, str(exc)) from None
    request.state.audit_count = len(told)
    return Told(command, told)


def _command(command: Command, where: str, param: str, whom: str) -> None:
    """The form and the API route of ``command`` for one pool or for a host's."""

    @routes.action(
        f"/{where}/{{{param}}}/{command}",
        f"{where[:-1]}_{command}",
        Told,
        409,
        summary=f"Tell {whom} to {_WHAT[command]}.",
    )
    async def tell(request: Request) -> msgspec.Struct | Response:
        told = await _tell(request, command, **{param: request.path_params[param]})
        if is_api(request):
            return told
        return await back(request, "/pools", "pools-" + command, len(told.pools))


for _c in ("quiet", "stop", "resume"):
    _command(_c, "pools", "pool_id", "a live pool")
    _command(_c, "hosts", "host", "every live pool of a host")
