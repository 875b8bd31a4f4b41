"""Who changed what through the web UI or its API, and when: the audit log.

Every request that changes something (any method but GET, HEAD and OPTIONS) and is
let through and answered without an error is recorded by the security middleware: when,
who (the credentials it came with: ``token``, ``basic:<user>``, ``session:<id>``, or
``open`` when the UI has no authentication), from which address (the one a trusted
proxy forwards), the method and path (which name the queue, job or set acted on), and
the answer's status; for an action on jobs picked by id (retry or delete the selected
jobs of a page, or ``ids`` given to the API), which jobs (``ids``); for a bulk action
under a search, its filter (``filter``: the text ``q`` matched against ids and names,
the part of the set ``from``, ``to``; for a clean by age, ``older_than`` and ``name``:
see :mod:`rota.web.actions`); for any action on jobs, how many it retried, deleted or
killed (``count``). Entries
are JSON in a Redis list (``Keys.web_audit``), newest first, the last :data:`KEEP`
kept, so that every process of the UI writes to one log and a restart loses nothing.
``/audit`` shows it, ``/api/audit`` returns it.

A log that Redis refuses (away, or a user without the rights ``rota acl web`` prints)
is logged as a warning and the action stands: the log is a record, not a gate.
"""

from __future__ import annotations

import base64
import binascii
import time
from typing import TYPE_CHECKING, Any, Final

import msgspec
import structlog
from starlette.datastructures import Headers

from rota.client import admin_reads
from rota.wire.redispy import REDIS_ERRORS

if TYPE_CHECKING:
    from rota.client import Client

__all__ = ["AUDIT_IDS", "KEEP", "AuditLog", "acted_on", "who"]

#: Entries kept, newest first.
KEEP: Final = 10_000
#: The most job ids an entry lists (``ids``; ``count`` says how many were acted on).
AUDIT_IDS: Final = 100

log = structlog.get_logger("rota.web")


def who(headers: Headers, session: str | None) -> str:
    """Who a request that was let in came as (its credentials were checked already)."""
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        return "token"
    if scheme.lower() == "basic":
        try:
            return "basic:" + base64.b64decode(value.strip()).decode().partition(":")[0]
        except (binascii.Error, UnicodeDecodeError):
            return "basic"
    if session:
        return "session:" + session.partition(".")[0][:8]
    return "open"


def acted_on(state: dict[str, Any]) -> dict[str, Any]:
    """What an action on jobs leaves in its request's state for its entry: the first
    :data:`AUDIT_IDS` ids it was given (the path does not name them), the filter it
    chose its jobs by, and how many it acted on."""
    out: dict[str, Any] = {}
    ids = state.get("audit_ids")
    if ids is not None:
        out.update(ids=ids[:AUDIT_IDS], count=len(ids))
    if state.get("audit_filter") is not None:
        out["filter"] = state["audit_filter"]
    if state.get("audit_count") is not None:
        out["count"] = state["audit_count"]
    return out


class AuditLog:
    def __init__(self, client: Client) -> None:
        self._client = client

    async def record(self, **entry: Any) -> None:
        """Add an entry (its time is added here)."""
        text = msgspec.json.encode({"at": int(time.time() * 1000), **entry})
        try:
            await admin_reads.audit_push(self._client, text, KEEP)
        except REDIS_ERRORS as exc:
            log.warning("the audit log could not be written", error=str(exc), **entry)

    async def recent(self, offset: int = 0, count: int = 100) -> tuple[int, list[dict[str, Any]]]:
        """How many entries there are, and a page of them, newest first."""
        total, raw = await admin_reads.audit_page(self._client, offset, count)
        entries = []
        for item in raw:
            try:
                entries.append(msgspec.json.decode(item))
            except msgspec.DecodeError:
                entries.append({"raw": item.decode(errors="replace")})
        return total, entries
