"""Turning a periodic job off and on again, from the cron page and the API (see
:mod:`rota.inspect.cron`). The change is audited and refused to read-only credentials as
every other one is.
"""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from rota.inspect import cron
from rota.protocol.job import validate_name
from rota.web import bodies as b
from rota.web import views
from rota.web.base import ApiError, JSONResponse, client_of, state_of, with_notice
from rota.web.schemas import documented

__all__ = ["api_routes", "routes"]


async def _switch(request: Request, on: bool) -> str:
    """Turn the periodic job named in the path on or off; 404 for a name that no live
    pool fires and that is not off."""
    name: str = request.path_params["name"]
    client = client_of(request)
    try:
        validate_name(name)
    except ValueError:
        raise HTTPException(404, f"no periodic job {name}") from None
    known = {c.name for c in (await views.cron(client, state_of(request).settings)).periodic}
    if name not in known:
        raise HTTPException(404, f"no periodic job {name}")
    await cron.switch(client, name, on)
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
