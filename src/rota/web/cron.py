"""The periodic jobs of the live pools, turning one off and on again (see
:mod:`rota.inspect.cron`) and running one now (see :mod:`rota.client.console`),
audited and refused to read-only credentials as any change."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

import msgspec
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from rota.client import console
from rota.client.spec import Enqueued
from rota.client.status import CronEntry
from rota.inspect import cron as switches
from rota.protocol.job import validate_name
from rota.web.base import ApiError, client_of, with_notice
from rota.web.declare import Ms, Routes, answer, is_api, ms, said

__all__ = ["routes"]

routes = Routes()


class CronJob(msgspec.Struct):
    """A periodic job as the live pools fire it: its cron expression and zone, the next
    fire time (the soonest any pool has), the last one a pool saw come (None: none since
    the pools started) and the pools that fire it (each fire time is enqueued once, by
    the pool that claims it)."""

    name: str
    cron: str
    tz: str
    next_at: Ms
    last_at: Ms | None
    pools: list[str]
    enabled: Annotated[bool, said("false: turned off, its fire times pass without a job")] = True
    off_since: Annotated[Ms | None, said("when it was turned off")] = None


class Cron(msgspec.Struct):
    periodic: list[CronJob]


CronState = answer("CronState", __name__, name=str, enabled=bool)


@routes.page("/cron", "cron.html")
@routes.api("/api/cron", "cron", Cron)
async def cron(request: Request) -> Cron:
    """Periodic jobs: next and last fire times, and whether each is on."""
    # What the live pools' snapshots say (stale pools left out), merged by name. The next
    # run is the soonest after the last one any pool saw (a pool whose heartbeat came
    # before that fire still names it as its next). A name turned off that no live pool
    # fires any more is listed too (it can be turned on again).
    client = client_of(request)
    seen: dict[str, list[tuple[CronEntry, str]]] = {}
    for pool in await client.admin.pools():
        for c in () if pool.stale else pool.periodic:
            seen.setdefault(c.name, []).append((c, pool.id))
    off = {name: ms(since) or None for name, since in (await switches.turned_off(client)).items()}
    out = []
    for name, entries in seen.items():
        first, pools = entries[0][0], [pool for _, pool in entries]
        last = max((c.last_at or 0 for c, _ in entries), default=0)
        nexts = [c.next_at for c, _ in entries]
        upcoming = min((n for n in nexts if n > last), default=max(nexts))
        last_ms = ms(last) if last else None
        on = name not in off
        out.append(
            CronJob(name, first.cron, first.tz, ms(upcoming), last_ms, pools, on, off.get(name))
        )
    out.sort(key=lambda c: (c.next_at, c.name))
    gone = [(name, since) for name, since in sorted(off.items()) if name not in seen]
    return Cron(out + [CronJob(name, "", "", 0, None, [], False, since) for name, since in gone])


def _switch(on: bool) -> None:
    action = "enable" if on else "disable"
    what = "on again" if on else "off: its fire times pass"

    @routes.action(
        f"/cron/{{name}}/{action}",
        f"cron_{action}",
        CronState,
        summary=f"Turn a periodic job {what} (on every pool).",
    )
    async def switch(request: Request) -> msgspec.Struct | Response:
        # 404 for a name that no live pool fires and that is not off
        name: str = request.path_params["name"]
        try:
            validate_name(name)
        except ValueError:
            raise ApiError(404, f"no periodic job {name}") from None
        if name not in {c.name for c in (await cron(request)).periodic}:
            raise ApiError(404, f"no periodic job {name}")
        await switches.switch(client_of(request), name, on)
        if is_api(request):
            return CronState(name, enabled=on)
        return RedirectResponse(with_notice("/cron", "cron-on" if on else "cron-off"), 303)


_switch(True)
_switch(False)


@routes.action(
    "/cron/{name}/run",
    "cron_run",
    Enqueued,
    summary="Enqueue one run of a periodic job now; its schedule goes on as planned.",
)
async def run(request: Request) -> Enqueued | Response:
    # 404 for a name that no live pool fires; created false: the fire time of the same
    # second enqueued it already, or another run now in that second did
    name: str = request.path_params["name"]
    try:
        job = await console.run_periodic(client_of(request), name)
    except (console.NoPeriodicJob, ValueError):
        raise ApiError(404, f"no periodic job {name} (no live pool fires it)") from None
    if is_api(request):
        return job
    return RedirectResponse(with_notice(f"/jobs/{quote(job.id, safe=':')}", "cron-run"), 303)
