"""The schemas of the JSON API's bodies, for the OpenAPI document (:mod:`rota.web.openapi`).

Kept apart from the paths so that each module stays short; the shapes here are what the
views of :mod:`rota.web.views` and :mod:`rota.web.related` return, field for field, and
a schema test (tests/web/test_schema.py) checks every answer against them.
"""

from __future__ import annotations

from typing import Any, Final

from rota.web.views import JOB_SETS, RETRYABLE

__all__ = [
    "BOOL",
    "ID_PATTERN",
    "INT",
    "JOB_SETS",
    "NAME_PATTERN",
    "NUM",
    "RETRYABLE",
    "STR",
    "Schema",
    "components",
    "ref",
]

NAME_PATTERN: Final = r"^[A-Za-z0-9_.:\-]{1,128}$"
ID_PATTERN: Final = r"^[A-Za-z0-9_.:\-]{1,200}$"

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def obj(required: list[str], **props: Schema) -> Schema:
    return {"type": "object", "required": required, "properties": props}


INT: Final[Schema] = {"type": "integer"}
NUM: Final[Schema] = {"type": "number"}
STR: Final[Schema] = {"type": "string"}
BOOL: Final[Schema] = {"type": "boolean"}
MS: Final[Schema] = {"type": ["integer", "null"], "description": "ms since the epoch"}
OPT_STR: Final[Schema] = {"type": ["string", "null"]}
OPT_INT: Final[Schema] = {"type": ["integer", "null"]}


def bucket() -> Schema:
    return obj(["start", "processed", "failed"], start=INT, processed=INT, failed=INT)


# Long on purpose: one declaration per schema, read as a table; split, it would be
# harder to check against the API's types.
def components() -> dict[str, Schema]:
    job_summary = obj(
        ["id", "name", "state", "attempts", "failures"],
        id=STR,
        name=STR,
        state=STR,
        args={**OPT_STR, "description": "the args as stored: JSON text"},
        attempts=INT,
        failures=INT,
        enqueued_at=MS,
        run_at=MS,
        finished_at=MS,
        reason=OPT_STR,
        error=OPT_STR,
        after={"type": "array", "items": STR, "description": "ids of the jobs it waits for"},
        pending={**INT, "description": "how many of them are not complete yet"},
        group={**OPT_STR, "description": "the group it is a member of"},
        waits_group={**OPT_STR, "description": "the group it is the callback of"},
    )
    related_list = {"type": "array", "items": ref("Related")}
    job = obj(
        ["id", "name", "state", "attempts", "failures", "lost", "logs"],
        **{k: v for k, v in job_summary["properties"].items() if k != "args"},
        args={"description": "the args decoded (null when they are not JSON)"},
        args_raw=OPT_STR,
        args_pretty=OPT_STR,
        lost=INT,
        started_at=MS,
        max_fails=OPT_INT,
        timeout={"type": ["number", "null"]},
        unique_key=OPT_STR,
        pool=OPT_STR,
        result={"description": "the result decoded"},
        result_raw=OPT_STR,
        result_pretty=OPT_STR,
        progress={
            "oneOf": [
                {"type": "null"},
                obj([], percent={"type": ["number", "null"]}, message=STR),
            ]
        },
        progress_raw=OPT_STR,
        raw=OPT_STR,
        logs={"type": "array", "items": STR},
        parents={**related_list, "description": "the jobs it waits for, in the order of after"},
        children={
            **related_list,
            "description": "the jobs enqueued after it, oldest first (at most 500)",
        },
        children_total=INT,
        callback={
            "oneOf": [{"type": "null"}, ref("Related")],
            "description": "for a member of a group: the group's callback",
        },
        group_progress={
            "oneOf": [{"type": "null"}, ref("GroupProgress")],
            "description": "the group it is a member or the callback of",
        },
    )
    progress_props: dict[str, Schema] = {
        "id": STR,
        "total": INT,
        "done": {**INT, "description": "members complete"},
        "failed": {**INT, "description": "members that ended dead or aborted"},
        "finished": {**BOOL, "description": "every member complete, dead or aborted"},
        "created_at": MS,
    }
    busy = obj(
        ["pool", "host", "pid", "job_id", "name", "since", "deadline", "progress", "message"],
        pool=STR,
        host=STR,
        pid=INT,
        job_id=STR,
        name=STR,
        since={**INT, "description": "start of the current lease (ms)"},
        deadline={**INT, "description": "end of the lease unless its pool extends it (ms)"},
        progress={**STR, "description": "the handler's last ctx.progress"},
        message={**STR, "description": "its last checkin, from its pool's snapshot"},
    )
    pool = obj(
        ["id", "host", "pid", "version", "concurrency", "jobs", "started_at", "last_heartbeat"],
        id=STR,
        host=STR,
        pid=INT,
        version=STR,
        namespace=STR,
        concurrency=INT,
        jobs={"type": "array", "items": STR},
        started_at=INT,
        heartbeat_at=INT,
        last_heartbeat=INT,
        busy=INT,
        stale={**BOOL, "description": "no heartbeat for over 2 intervals"},
    )
    queue = obj(
        ["name", "size", "latency", "running", "limit", "paused", "priority"],
        name=STR,
        size=INT,
        latency={**NUM, "description": "age in seconds of the oldest queued job"},
        running=INT,
        limit=OPT_INT,
        paused=BOOL,
        priority=OPT_INT,
        rate={**OPT_STR, "description": "its rate limit, e.g. '100/s'"},
        done_per_second={**NUM, "description": "completed per second over the last minute"},
    )
    return {
        "Error": obj(["error"], error=STR),
        "Bucket": bucket(),
        "Dashboard": obj(
            ["namespace", "totals", "sizes", "minutes", "days"],
            namespace=STR,
            totals={"type": "object", "additionalProperties": INT},
            sizes={"type": "object", "additionalProperties": INT},
            minutes={"type": "array", "items": ref("Bucket")},
            days={"type": "array", "items": ref("Bucket")},
        ),
        "Queue": queue,
        "Queues": obj(["queues"], queues={"type": "array", "items": ref("Queue")}),
        "Pool": pool,
        "Pools": obj(
            ["pools"], pools={"type": "array", "items": ref("Pool")}, heartbeat_interval=NUM
        ),
        "BusyWorker": busy,
        "Busy": obj(["workers"], workers={"type": "array", "items": ref("BusyWorker")}),
        "JobSummary": job_summary,
        "JobPage": obj(
            ["set", "total", "offset", "limit", "jobs"],
            set={"enum": list(JOB_SETS)},
            q=STR,
            total=INT,
            offset=INT,
            limit=INT,
            searched={**OPT_INT, "description": "jobs read by a search"},
            jobs={"type": "array", "items": ref("JobSummary")},
        ),
        "Job": job,
        "Related": obj(
            ["id", "name", "state"],
            id=STR,
            name=OPT_STR,
            state={**STR, "description": "'missing' when its record is gone"},
        ),
        "GroupProgress": obj(
            [*progress_props, "then"],
            **progress_props,
            then={**OPT_STR, "description": "the callback's job id"},
        ),
        "Group": obj(
            [*progress_props, "then", "offset", "limit", "members"],
            **progress_props,
            then={"oneOf": [{"type": "null"}, ref("Related")], "description": "the callback"},
            offset=INT,
            limit=INT,
            members={"type": "array", "items": ref("Related")},
        ),
        "Flow": obj(
            ["id", "nodes", "edges", "limit", "truncated"],
            id=STR,
            nodes={"type": "array", "items": ref("Related")},
            edges={
                "type": "array",
                "items": obj(
                    ["from", "to", "kind"],
                    **{
                        "from": {**STR, "description": "the parent"},
                        "to": {**STR, "description": "the child"},
                        "kind": {
                            "enum": ["after", "group"],
                            "description": "after: enqueued after; group: a member and"
                            " its group's callback",
                        },
                    },
                ),
            },
            limit={**INT, "description": "the most jobs a flow holds"},
            truncated={**BOOL, "description": "some jobs of the flow were left out"},
        ),
        "Redis": obj(
            ["ping_ms", "info", "namespace"],
            ping_ms={**NUM, "description": "round trip of a PING from the web server"},
            info={"type": "object"},
            namespace=STR,
        ),
        "QueueState": obj(["name", "paused"], name=STR, paused=BOOL),
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
        "QueueRate": obj(["name", "rate"], name=STR, rate=OPT_STR),
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
        "QueueLimit": obj(["name", "limit"], name=STR, limit=OPT_INT),
        "Cleared": obj(["name", "deleted"], name=STR, deleted=INT),
        "Ids": {
            "type": "object",
            "additionalProperties": False,
            "description": 'the jobs to act on: {"ids": [...]} or {"all": true}',
            "properties": {
                "ids": {"type": "array", "items": STR, "minItems": 1, "maxItems": 1000},
                "all": {"const": True},
            },
            "oneOf": [{"required": ["ids"]}, {"required": ["all"]}],
        },
        "Retried": obj(["retried"], retried=INT),
        "Deleted": obj(["deleted"], deleted=INT),
        "Aborted": obj(["id", "was"], id=STR, was={**STR, "description": "its state before"}),
        "EnqueueRequest": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name"],
            "properties": {
                "name": {**STR, "pattern": NAME_PATTERN},
                "args": {"type": "array", "description": "positional args"},
                "kwargs": {"type": "object", "description": "keyword args"},
                "delay": {**NUM, "minimum": 0, "maximum": 315360000},
                "run_at": {
                    "description": "epoch seconds or an ISO-8601 time (UTC if no offset)",
                    "oneOf": [
                        {**NUM, "minimum": 0, "maximum": 253402300799},
                        {**STR, "format": "date-time"},
                    ],
                },
                "unique": {**STR, "minLength": 1, "maxLength": 1024},
                "max_fails": {**INT, "minimum": 1, "maximum": 1000000},
                "timeout": {**NUM, "exclusiveMinimum": 0, "maximum": 315360000},
                "after": {
                    "type": "array",
                    "items": {**STR, "pattern": NAME_PATTERN},
                    "maxItems": 1000,
                    "description": "ids of jobs that must complete first; a job id that"
                    " does not exist is a 422 and nothing is enqueued",
                },
            },
            "not": {"anyOf": [{"required": ["args", "kwargs"]}, {"required": ["delay", "run_at"]}]},
        },
        "Enqueued": obj(["id", "name", "created"], id=STR, name=STR, created=BOOL),
    }
