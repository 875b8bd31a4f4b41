"""Turning a periodic job off and on again, from the cron page and the API.

A name turned off is a field of one hash (``Keys.cron_off``: name -> since when, ms),
which every pool's scheduler looks up when a fire time of the name comes: the time passes
without a job on every pool, and the pools keep their schedules, so turning it on again
takes effect at its next fire time. Kept in Redis, it outlives the pools and the UI.
The change is audited and refused to read-only credentials as every other one is.
"""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from rota.client import Client
from rota.config import Settings
from rota.protocol.job import now_ms, reply_text, validate_name
from rota.web import bodies as b
from rota.web import views
from rota.web.base import ApiError, JSONResponse, client_of, state_of, with_notice
from rota.web.schemas import documented

__all__ = ["api_routes", "cron", "routes", "turned_off"]


async def turned_off(client: Client) -> dict[str, int]:
    """The periodic jobs turned off: name -> since when (ms)."""
    raw = await client.redis.hgetall(client.keys.cron_off)
    out = {}
    for k, v in raw.items():
        try:
            out[reply_text(k)] = int(v)
        except ValueError:
            out[reply_text(k)] = 0
    return out


async def cron(client: Client, settings: Settings) -> b.Cron:
    """The cron page's periodic jobs, each saying whether it is on; a name turned off
    that no live pool fires any more is listed too (it can be turned on again)."""
    found = await views.cron(client, settings)
    off = await turned_off(client)
    out = [
        msgspec.structs.replace(c, enabled=c.name not in off, off_since=off.get(c.name) or None)
        for c in found.periodic
    ]
    listed = {c.name for c in out}
    out += [
        b.CronJob(name, "", "", 0, None, [], enabled=False, off_since=since or None)
        for name, since in sorted(off.items())
        if name not in listed
    ]
    return b.Cron(out)


async def _switch(request: Request, on: bool) -> str:
    """Turn the periodic job named in the path on or off; 404 for a name that no live
    pool fires and that is not off."""
    name: str = request.path_params["name"]
    client = client_of(request)
    try:
        validate_name(name)
    except ValueError:
        raise HTTPException(404, f"no periodic job {name}") from None
    known = {c.name for c in (await cron(client, state_of(request).settings)).periodic}
    if name not in known:
        raise HTTPException(404, f"no periodic job {name}")
    if on:
        await client.redis.hdel(client.keys.cron_off, name)
    else:
        await client.redis.hset(client.keys.cron_off, name, now_ms())
    return name


async def switch_form(request: Request) -> Response:
    on = request.path_params["action"] == "enable"
    if request.path_params["action"] not in ("enable", "disable"):
        raise HTTPException(404, "no such action")
    await _switch(request, on)
    return RedirectResponse(with_notice("/cron", "cron-on" if on else "cron-off"), 303)


def switch_api(on: bool) -> Any:
    what = "on again" if on else "off: its fire times pass"

    @documented("cron_enable" if on else "cron_disable", b.CronState, 404)
    async def switch(request: Request) -> Response:
        try:
            name = await _switch(request, on)
        except HTTPException as exc:
            raise ApiError(exc.status_code, str(exc.detail)) from None
        return JSONResponse(b.CronState(name, enabled=on))

    switch.__name__ = "cron_enable" if on else "cron_disable"
    switch.__doc__ = f"Turn a periodic job {what} (on every pool)."
    return switch


routes: list[BaseRoute] = [Route("/cron/{name}/{action}", switch_form, methods=["POST"])]
api_routes: list[BaseRoute] = [
    Route("/api/cron/{name}/enable", switch_api(True), methods=["POST"]),
    Route("/api/cron/{name}/disable", switch_api(False), methods=["POST"]),
]
