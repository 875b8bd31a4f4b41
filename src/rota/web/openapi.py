"""The OpenAPI 3.1 document of the JSON API, served at ``/api/openapi.json``."""

from __future__ import annotations

import copy
import functools
from typing import Any, Final

from rota import __version__

__all__ = ["spec"]

JOB_SETS: Final = ("scheduled", "retry", "dead", "waiting")
RETRYABLE: Final = ("scheduled", "retry", "dead")  # a waiting job runs after its parents
NAME_PATTERN: Final = r"^[A-Za-z0-9_.:\-]{1,128}$"
ID_PATTERN: Final = r"^[A-Za-z0-9_.:\-]{1,200}$"

Schema = dict[str, Any]


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(required: list[str], **props: Schema) -> Schema:
    return {"type": "object", "required": required, "properties": props}


_INT: Final[Schema] = {"type": "integer"}
_NUM: Final[Schema] = {"type": "number"}
_STR: Final[Schema] = {"type": "string"}
_BOOL: Final[Schema] = {"type": "boolean"}
_MS: Final[Schema] = {"type": ["integer", "null"], "description": "ms since the epoch"}
_OPT_STR: Final[Schema] = {"type": ["string", "null"]}
_OPT_INT: Final[Schema] = {"type": ["integer", "null"]}


def _bucket() -> Schema:
    return _obj(["start", "processed", "failed"], start=_INT, processed=_INT, failed=_INT)


def _schemas() -> dict[str, Schema]:
    job_summary = _obj(
        ["id", "name", "state", "attempts", "failures"],
        id=_STR,
        name=_STR,
        state=_STR,
        args={**_OPT_STR, "description": "the args as stored: JSON text"},
        attempts=_INT,
        failures=_INT,
        enqueued_at=_MS,
        run_at=_MS,
        finished_at=_MS,
        reason=_OPT_STR,
        error=_OPT_STR,
        after={"type": "array", "items": _STR, "description": "ids of the jobs it waits for"},
        pending={**_INT, "description": "how many of them are not complete yet"},
        group={**_OPT_STR, "description": "the group it is a member of"},
        waits_group={**_OPT_STR, "description": "the group it is the callback of"},
    )
    related_list = {"type": "array", "items": _ref("Related")}
    job = _obj(
        ["id", "name", "state", "attempts", "failures", "lost", "logs"],
        **{k: v for k, v in job_summary["properties"].items() if k != "args"},
        args={"description": "the args decoded (null when they are not JSON)"},
        args_raw=_OPT_STR,
        args_pretty=_OPT_STR,
        lost=_INT,
        started_at=_MS,
        max_fails=_OPT_INT,
        timeout={"type": ["number", "null"]},
        unique_key=_OPT_STR,
        pool=_OPT_STR,
        result={"description": "the result decoded"},
        result_raw=_OPT_STR,
        result_pretty=_OPT_STR,
        progress={
            "oneOf": [
                {"type": "null"},
                _obj([], percent={"type": ["number", "null"]}, message=_STR),
            ]
        },
        progress_raw=_OPT_STR,
        raw=_OPT_STR,
        logs={"type": "array", "items": _STR},
        parents={**related_list, "description": "the jobs it waits for, in the order of after"},
        children={
            **related_list,
            "description": "the jobs enqueued after it, oldest first (at most 500)",
        },
        children_total=_INT,
        callback={
            "oneOf": [{"type": "null"}, _ref("Related")],
            "description": "for a member of a group: the group's callback",
        },
        group_progress={
            "oneOf": [{"type": "null"}, _ref("GroupProgress")],
            "description": "the group it is a member or the callback of",
        },
    )
    progress_props: dict[str, Schema] = {
        "id": _STR,
        "total": _INT,
        "done": {**_INT, "description": "members complete"},
        "failed": {**_INT, "description": "members that ended dead or aborted"},
        "finished": {**_BOOL, "description": "every member complete, dead or aborted"},
        "created_at": _MS,
    }
    busy = _obj(
        ["pool", "host", "pid", "job_id", "name", "since", "deadline", "progress", "message"],
        pool=_STR,
        host=_STR,
        pid=_INT,
        job_id=_STR,
        name=_STR,
        since={**_INT, "description": "start of the current lease (ms)"},
        deadline={**_INT, "description": "end of the lease unless its pool extends it (ms)"},
        progress={**_STR, "description": "the handler's last ctx.progress"},
        message={**_STR, "description": "its last checkin, from its pool's snapshot"},
    )
    pool = _obj(
        ["id", "host", "pid", "version", "concurrency", "jobs", "started_at", "last_heartbeat"],
        id=_STR,
        host=_STR,
        pid=_INT,
        version=_STR,
        namespace=_STR,
        concurrency=_INT,
        jobs={"type": "array", "items": _STR},
        started_at=_INT,
        heartbeat_at=_INT,
        last_heartbeat=_INT,
        busy=_INT,
        stale={**_BOOL, "description": "no heartbeat for over 2 intervals"},
    )
    queue = _obj(
        ["name", "size", "latency", "running", "limit", "paused", "priority"],
        name=_STR,
        size=_INT,
        latency={**_NUM, "description": "age in seconds of the oldest queued job"},
        running=_INT,
        limit=_OPT_INT,
        paused=_BOOL,
        priority=_OPT_INT,
        rate={**_OPT_STR, "description": "its rate limit, e.g. '100/s'"},
        done_per_second={**_NUM, "description": "completed per second over the last minute"},
    )
    return {
        "Error": _obj(["error"], error=_STR),
        "Bucket": _bucket(),
        "Dashboard": _obj(
            ["namespace", "totals", "sizes", "minutes", "days"],
            namespace=_STR,
            totals={"type": "object", "additionalProperties": _INT},
            sizes={"type": "object", "additionalProperties": _INT},
            minutes={"type": "array", "items": _ref("Bucket")},
            days={"type": "array", "items": _ref("Bucket")},
        ),
        "Queue": queue,
        "Queues": _obj(["queues"], queues={"type": "array", "items": _ref("Queue")}),
        "Pool": pool,
        "Pools": _obj(
            ["pools"], pools={"type": "array", "items": _ref("Pool")}, heartbeat_interval=_NUM
        ),
        "BusyWorker": busy,
        "Busy": _obj(["workers"], workers={"type": "array", "items": _ref("BusyWorker")}),
        "JobSummary": job_summary,
        "JobPage": _obj(
            ["set", "total", "offset", "limit", "jobs"],
            set={"enum": list(JOB_SETS)},
            q=_STR,
            total=_INT,
            offset=_INT,
            limit=_INT,
            searched={**_OPT_INT, "description": "jobs read by a search"},
            jobs={"type": "array", "items": _ref("JobSummary")},
        ),
        "Job": job,
        "Related": _obj(
            ["id", "name", "state"],
            id=_STR,
            name=_OPT_STR,
            state={**_STR, "description": "'missing' when its record is gone"},
        ),
        "GroupProgress": _obj(
            [*progress_props, "then"],
            **progress_props,
            then={**_OPT_STR, "description": "the callback's job id"},
        ),
        "Group": _obj(
            [*progress_props, "then", "offset", "limit", "members"],
            **progress_props,
            then={"oneOf": [{"type": "null"}, _ref("Related")], "description": "the callback"},
            offset=_INT,
            limit=_INT,
            members={"type": "array", "items": _ref("Related")},
        ),
        "Flow": _obj(
            ["id", "nodes", "edges", "limit", "truncated"],
            id=_STR,
            nodes={"type": "array", "items": _ref("Related")},
            edges={
                "type": "array",
                "items": _obj(
                    ["from", "to", "kind"],
                    **{
                        "from": {**_STR, "description": "the parent"},
                        "to": {**_STR, "description": "the child"},
                        "kind": {
                            "enum": ["after", "group"],
                            "description": "after: enqueued after; group: a member and"
                            " its group's callback",
                        },
                    },
                ),
            },
            limit={**_INT, "description": "the most jobs a flow holds"},
            truncated={**_BOOL, "description": "some jobs of the flow were left out"},
        ),
        "Redis": _obj(
            ["ping_ms", "info", "namespace"],
            ping_ms={**_NUM, "description": "round trip of a PING from the web server"},
            info={"type": "object"},
            namespace=_STR,
        ),
        "QueueState": _obj(["name", "paused"], name=_STR, paused=_BOOL),
        "RateRequest": {
            "type": "object",
            "additionalProperties": False,
            "required": ["rate"],
            "properties": {
                "rate": {
                    "type": ["string", "null"],
                    "description": "jobs that may start per second, minute or hour, e.g."
                    " '100/s', '30/min', '2/hour'; null removes the limit",
                }
            },
        },
        "QueueRate": _obj(["name", "rate"], name=_STR, rate=_OPT_STR),
        "LimitRequest": {
            "type": "object",
            "additionalProperties": False,
            "required": ["limit"],
            "properties": {
                "limit": {
                    "type": ["integer", "null"],
                    "minimum": 1,
                    "maximum": 1000000,
                    "description": "most jobs of the name running at once; null: no limit",
                }
            },
        },
        "QueueLimit": _obj(["name", "limit"], name=_STR, limit=_OPT_INT),
        "Cleared": _obj(["name", "deleted"], name=_STR, deleted=_INT),
        "Ids": {
            "type": "object",
            "additionalProperties": False,
            "description": 'the jobs to act on: {"ids": [...]} or {"all": true}',
            "properties": {
                "ids": {"type": "array", "items": _STR, "minItems": 1, "maxItems": 1000},
                "all": {"const": True},
            },
            "oneOf": [{"required": ["ids"]}, {"required": ["all"]}],
        },
        "Retried": _obj(["retried"], retried=_INT),
        "Deleted": _obj(["deleted"], deleted=_INT),
        "Aborted": _obj(["id", "was"], id=_STR, was={**_STR, "description": "its state before"}),
        "EnqueueRequest": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name"],
            "properties": {
                "name": {**_STR, "pattern": NAME_PATTERN},
                "args": {"type": "array", "description": "positional args"},
                "kwargs": {"type": "object", "description": "keyword args"},
                "delay": {**_NUM, "minimum": 0, "maximum": 315360000},
                "run_at": {
                    "description": "epoch seconds or an ISO-8601 time (UTC if no offset)",
                    "oneOf": [
                        {**_NUM, "minimum": 0, "maximum": 253402300799},
                        {**_STR, "format": "date-time"},
                    ],
                },
                "unique": {**_STR, "minLength": 1, "maxLength": 1024},
                "max_fails": {**_INT, "minimum": 1, "maximum": 1000000},
                "timeout": {**_NUM, "exclusiveMinimum": 0, "maximum": 315360000},
                "after": {
                    "type": "array",
                    "items": {**_STR, "pattern": NAME_PATTERN},
                    "maxItems": 1000,
                    "description": "ids of jobs that must complete first; a job id that"
                    " does not exist is a 422 and nothing is enqueued",
                },
            },
            "not": {"anyOf": [{"required": ["args", "kwargs"]}, {"required": ["delay", "run_at"]}]},
        },
        "Enqueued": _obj(["id", "name", "created"], id=_STR, name=_STR, created=_BOOL),
    }


def _json(schema: str, description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(schema)}}}


def _errors(*codes: int) -> dict[str, Any]:
    text = {
        400: "bad parameters or a body that is not JSON",
        401: "authentication required",
        403: "cross-site request refused",
        404: "no such job, queue or group",
        413: "args too large",
        415: "the body is not application/json",
        422: "a body that does not fit (or an after= parent that does not exist)",
        503: "Redis is unavailable, or refuses the request for now (out of memory, a"
        " read-only replica, loading its data set...); the error says which",
    }
    return {str(c): _json("Error", text[c]) for c in (*codes, 401, 503)}


def _get(op_id: str, summary: str, schema: str, *codes: int, **extra: Any) -> dict[str, Any]:
    return {
        "get": {
            "operationId": op_id,
            "summary": summary,
            "responses": {"200": _json(schema), **_errors(*codes)},
            **extra,
        }
    }


def _post(op_id: str, summary: str, schema: str, *codes: int, **extra: Any) -> dict[str, Any]:
    return {
        "post": {
            "operationId": op_id,
            "summary": summary,
            "responses": {"200": _json(schema), **_errors(403, *codes)},
            **extra,
        }
    }


def _query(name: str, schema: Schema, description: str) -> Schema:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


def _path(name: str, pattern: str | None = None) -> Schema:
    schema: Schema = {"type": "string", "minLength": 1}
    if pattern:
        schema["pattern"] = pattern
    return {"name": name, "in": "path", "required": True, "schema": schema}


def _body(schema: str) -> Schema:
    return {"required": True, "content": {"application/json": {"schema": _ref(schema)}}}


def _paths() -> dict[str, Any]:
    name = [_path("name", NAME_PATTERN)]
    job_id = [_path("job_id", ID_PATTERN)]
    paging = [
        _query("offset", {**_INT, "minimum": 0}, "default 0"),
        _query("limit", {**_INT, "minimum": 1, "maximum": 1000}, "default 100"),
    ]
    paths: dict[str, Any] = {
        "/api/dashboard": _get(
            "dashboard",
            "Totals, sizes, and processed/failed per minute and per day",
            "Dashboard",
            400,
            parameters=[
                _query("minutes", {**_INT, "minimum": 1, "maximum": 120}, "default 60"),
                _query("days", {**_INT, "minimum": 1, "maximum": 90}, "default 30"),
            ],
        ),
        "/api/queues": _get("queues", "Every queue's figures", "Queues"),
        "/api/pools": _get("pools", "Live pools and their heartbeats", "Pools"),
        "/api/busy": _get("busy", "Jobs running now, from the running sets", "Busy"),
        "/api/redis": _get("redis", "Redis server figures and round trip", "Redis"),
        "/api/jobs/{job_id}": _get(
            "job", "Everything about one job", "Job", 404, parameters=job_id
        ),
        "/api/jobs/{job_id}/abort": _post(
            "abort", "Abort a job", "Aborted", 404, parameters=job_id
        ),
        "/api/groups/{group_id}": _get(
            "group",
            "A group's progress, its callback, and a page of its members",
            "Group",
            400,
            404,
            parameters=[_path("group_id", ID_PATTERN), *paging],
        ),
        "/api/flows/{job_id}": _get(
            "flow",
            "The graph of the workflow a job belongs to (at most 200 jobs)",
            "Flow",
            404,
            parameters=job_id,
        ),
        "/api/jobs": {
            "post": {
                "operationId": "enqueue",
                "summary": "Enqueue a job",
                "requestBody": _body("EnqueueRequest"),
                "responses": {
                    "201": _json("Enqueued", "enqueued"),
                    "200": _json("Enqueued", "nothing new: the unique key is held"),
                    **_errors(400, 403, 413, 415, 422),
                },
            }
        },
    }
    for action, schema in (("pause", "QueueState"), ("resume", "QueueState"), ("clear", "Cleared")):
        paths[f"/api/queues/{{name}}/{action}"] = _post(
            f"queue_{action}", f"{action.capitalize()} a queue", schema, 404, parameters=name
        )
    paths["/api/queues/{name}/rate"] = _post(
        "queue_rate",
        "Set or remove the rate limit of a queue (across all pools)",
        "QueueRate",
        400,
        404,
        415,
        422,
        parameters=name,
        requestBody=_body("RateRequest"),
    )
    paths["/api/queues/{name}/limit"] = _post(
        "queue_limit",
        "Set or remove the concurrency limit of a queue (across all pools)",
        "QueueLimit",
        400,
        404,
        415,
        422,
        parameters=name,
        requestBody=_body("LimitRequest"),
    )
    for which in JOB_SETS:
        paths[f"/api/{which}"] = _get(
            f"list_{which}",
            f"A page of the {which} jobs, searchable by id and name",
            "JobPage",
            400,
            parameters=[
                _query("offset", {**_INT, "minimum": 0}, "default 0"),
                _query("limit", {**_INT, "minimum": 1, "maximum": 500}, "default 25"),
                _query("q", {**_STR, "maxLength": 200}, "part of a job id or name"),
            ],
        )
        for action, schema in (("retry", "Retried"), ("delete", "Deleted")):
            if action == "retry" and which not in RETRYABLE:
                continue
            paths[f"/api/{which}/{action}"] = _post(
                f"{which}_{action}",
                f"{action.capitalize()} {which} jobs: some ids, or all",
                schema,
                400,
                404,
                415,
                422,
                requestBody=_body("Ids"),
            )
    return paths


def spec() -> dict[str, Any]:
    """The document (a fresh copy); its operations need auth only when the server was
    started with it."""
    return copy.deepcopy(_spec())


@functools.cache
def _spec() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "rota",
            "version": __version__,
            "description": "Queues, pools and jobs of one rota namespace. POSTs from a browser"
            " must be same-origin; see docs/web.md.",
        },
        "paths": _paths(),
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {
                "basic": {"type": "http", "scheme": "basic"},
                "bearer": {"type": "http", "scheme": "bearer"},
            },
        },
        "security": [{}, {"basic": []}, {"bearer": []}],
    }
