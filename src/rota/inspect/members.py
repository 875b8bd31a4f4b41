"""A group's members in one state: what a group's page filters by, read on the server
side so that a page of dead members is one page whatever the size of the group."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal

from rota.client import admin_reads
from rota.client.workflow import Related

if TYPE_CHECKING:
    from rota.client.shard import Shard

__all__ = ["MEMBER_SCAN", "MEMBER_STATES", "MemberState", "member_state", "members_in_state"]

MemberState = Literal["dead", "running", "waiting", "complete"]
#: The job states each filter keeps: "dead" those that will not run again, "waiting"
#: those that have not run yet or will run again.
MEMBER_STATES: Final[dict[MemberState, frozenset[str]]] = {
    "dead": frozenset({"dead", "aborted"}),
    "running": frozenset({"running"}),
    "waiting": frozenset({"queued", "scheduled", "retry", "waiting"}),
    "complete": frozenset({"complete"}),
}
#: The most members read to filter a group; past it the filter says where it stopped.
MEMBER_SCAN: Final = 50_000
_CHUNK: Final = 2_000


async def members_in_state(
    shard: Shard, group_id: str, state: MemberState, offset: int, limit: int
) -> tuple[list[Related], int, int]:
    """A page of the members of a group (in ``shard``, which holds it) in ``state``, in
    the order they were enqueued; how many there are; how many members were read (all
    of them, or :data:`MEMBER_SCAN`). Each member's name and state, 2,000 a round trip,
    through the bare connection (cheap for thousands of commands)."""
    keep = MEMBER_STATES[state]
    found: list[Related] = []
    read = 0
    while read < MEMBER_SCAN:
        chunk = await admin_reads.member_rows(shard, group_id, read, _CHUNK)
        found += [r for r in chunk if r.state in keep]
        read += len(chunk)
        if len(chunk) < _CHUNK:
            break
    return found[offset : offset + limit], len(found), read


def member_state(text: str | None) -> MemberState | None:
    """The filter ``text`` names; None for all members (or a text that names none)."""
    return next((s for s in MEMBER_STATES if s == text), None)
