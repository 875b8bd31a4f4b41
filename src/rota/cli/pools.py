"""``rota pools list|quiet|stop|resume``: the live pools, and the operator's commands to
one of them or to every pool of a host, carried through Redis (see
:mod:`rota.client.pools`): each pool obeys at once (at its next heartbeat at the latest)
and says so in its state."""

from __future__ import annotations

from typing import Any, Final

import anyio
import click
import msgspec

from rota.cli.common import ExitError, connection_options, json_option, with_client
from rota.cli.output import age, echo_json, print_table
from rota.client import Client
from rota.client.pools import Command, PoolNotFound, StopIsFinal
from rota.config import Settings

__all__ = ["pools"]

#: The state each command's pools reach once they obeyed (None: gone).
_OBEYED: Final[dict[str, tuple[str | None, ...]]] = {
    "quiet": ("quiet",),
    "stop": ("stopping", None),
    "resume": ("running",),
}
#: How many of a pool's heartbeat intervals ``--wait`` waits for it, at least 2 seconds.
_WAIT_BEATS: Final = 3


@click.group()
def pools() -> None:
    """List the live pools; quiet, stop or resume one, or every pool of a host."""


@pools.command("list")
@json_option
@connection_options
@with_client
async def pools_list(client: Client, settings: Settings, as_json: bool) -> None:
    """The live pools: host, pid, state (running, quieting, quiet, stopping) and what an
    operator told them."""
    live = await client.admin.pools()
    told = await client.admin.commands.read()
    if as_json:
        echo_json([{**msgspec.structs.asdict(p), "told": told.get(p.id)} for p in live])
        return
    print_table(
        "pools",
        ["id", "host", "pid", "state", "told", "concurrency", "heartbeat"],
        [
            [
                p.id,
                p.host,
                p.pid,
                p.state,
                told.get(p.id, ""),
                p.concurrency,
                age(p.last_heartbeat) + (" STALE" if p.stale else ""),
            ]
            for p in live
        ],
    )


_HELP: Final = {
    "quiet": "Tell pool ID (or every pool of --host) to fetch no more jobs and finish those"
    " it runs; it stays alive, says quiet, and fetches again when resumed.",
    "stop": "Tell pool ID (or every pool of --host) to stop as on SIGTERM: it drains within"
    " its grace (jobs not done go back to their queues) and leaves. A stop is final.",
    "resume": "Tell a quiet pool ID (or every pool of --host) to fetch again.",
}


def _command(command: Command) -> click.Command:
    @click.command(command, help=_HELP[command])
    @click.argument("pool_id", metavar="[ID]", required=False)
    @click.option("--host", help="Every live pool of this host (its snapshot's hostname).")
    @click.option(
        "--wait",
        is_flag=True,
        help=f"Wait until each pool says it obeyed (up to {_WAIT_BEATS} of its heartbeats).",
    )
    @json_option
    @connection_options
    def tell(pool_id: str | None, host: str | None, **kwargs: Any) -> None:
        if (pool_id is None) == (host is None):
            raise click.UsageError("give a pool ID or --host, not both")
        _tell(command=command, pool_id=pool_id, host=host, **kwargs)

    return tell


@with_client
async def _tell(
    client: Client,
    settings: Settings,
    command: Command,
    pool_id: str | None,
    host: str | None,
    wait: bool,
    as_json: bool,
) -> None:
    try:
        told = await client.admin.commands.give(command, pool_id=pool_id, host=host)
    except (PoolNotFound, StopIsFinal) as exc:
        raise ExitError(str(exc), code=1) from None
    states = await _obeyed(client, command, told) if wait else None
    if as_json:
        echo_json({"command": command, "pools": told, **({"states": states} if wait else {})})
    elif not told:
        click.echo(f"no pool of host {host} to {command}: each was told to stop")
    for pool in told if not as_json else ():
        shown = f" ({states[pool] or 'gone'})" if states is not None else ""
        click.echo(f"{command}: {pool}{shown}")
    if states is not None:
        late = [p for p, s in states.items() if s not in _OBEYED[command]]
        if late:
            raise ExitError(
                f"{len(late)} pools did not say they obeyed in time: {', '.join(late)}", 1
            )


async def _obeyed(client: Client, command: Command, told: list[str]) -> dict[str, str | None]:
    """Each told pool's state once all said they obeyed, or after the wait ran out."""
    live = {p.id: p for p in await client.admin.pools()}
    beat = max((live[p].heartbeat_interval for p in told if p in live), default=1.0)
    states: dict[str, str | None] = dict.fromkeys(told, "unknown")
    with anyio.move_on_after(max(2.0, _WAIT_BEATS * beat)):
        while True:
            live = {p.id: p for p in await client.admin.pools()}
            states = {p: live[p].state if p in live else None for p in told}
            if all(s in _OBEYED[command] for s in states.values()):
                break
            await anyio.sleep(min(0.1, beat / 4))
    return states


for _c in ("quiet", "stop", "resume"):
    pools.add_command(_command(_c))
