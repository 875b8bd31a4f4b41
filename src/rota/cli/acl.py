"""``rota acl ROLE``: the ``ACL SETUSER`` line of a least-privilege Redis user.

The lines name the functions of the installed version's library, whose name changes
with its Lua code, so they are printed by the version that will use them rather than
copied from a page (see docs/operations.md, "TLS and least-privilege users").
"""

from __future__ import annotations

import click

from rota.acl import ROLES, setuser
from rota.cli.common import ExitError
from rota.protocol.keys import validate_namespace

__all__ = ["acl"]


@click.command()
@click.argument("role", type=click.Choice(ROLES))
@click.option("--user", help="The user's name (default: rota-ROLE).")
@click.option("--namespace", default="rota", show_default=True)
@click.option(
    "--shards",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="How many shards the namespace spans (the setting shards).",
)
def acl(role: str, user: str | None, namespace: str, shards: int) -> None:
    """Print the ACL SETUSER line for a ROLE user of a namespace (Redis 7): replace
    <password> (or write #<sha256 of it>) and run it with redis-cli or put it in an ACL
    file."""
    try:
        validate_namespace(namespace)
    except ValueError as exc:
        raise ExitError(f"--namespace: {exc}") from None
    click.echo(setuser(role, user or f"rota-{role}", namespace, shards=shards))
