"""The OpenAPI 3.1 document of the JSON API, served at ``/api/openapi.json``."""

from __future__ import annotations

import copy
import functools
from typing import Any

from rota import __version__
from rota.web import bodies as b
from rota.web import request_bodies as r
from rota.web.schemas import ID_PATTERN, INT, STR, Body, Schema, components, ref
from rota.web.views import JOB_SETS, RETRYABLE

__all__ = ["spec"]


def _json(schema: Body, description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": ref(schema)}}}


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
    return {str(c): _json(b.Error, text[c]) for c in (*codes, 401, 503)}


def _get(op_id: str, summary: str, schema: Body, *codes: int, **extra: Any) -> dict[str, Any]:
    return {
        "get": {
            "operationId": op_id,
            "summary": summary,
            "responses": {"200": _json(schema), **_errors(*codes)},
            **extra,
        }
    }


def _post(op_id: str, summary: str, schema: Body, *codes: int, **extra: Any) -> dict[str, Any]:
    return {
        "post": {
            "operationId": op_id,
            "summary": summary,
            "responses": {"200": _json(schema), **_errors(403, *codes)},
            **extra,
        }
    }


def _raw(op_id: str, summary: str) -> dict[str, Any]:
    """A job's stored value: JSON of any shape, sent as stored."""
    json_any = {"description": "OK", "content": {"application/json": {"schema": {}}}}
    return {
        "get": {
            "operationId": op_id,
            "summary": summary,
            "parameters": [_path("job_id", ID_PATTERN)],
            "responses": {"200": json_any, **_errors(404)},
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


def _body(schema: Body) -> Schema:
    return {"required": True, "content": {"application/json": {"schema": ref(schema)}}}


# Long on purpose: one entry per route, read as a table beside web/api.py's routes.
def _paths() -> dict[str, Any]:
    name = [_path("name", r.NAME_PATTERN)]
    job_id = [_path("job_id", ID_PATTERN)]
    paging = [
        _query("offset", {**INT, "minimum": 0}, "default 0"),
        _query("limit", {**INT, "minimum": 1, "maximum": 1000}, "default 100"),
    ]
    paths: dict[str, Any] = {
        "/api/dashboard": _get(
            "dashboard",
            "Totals, sizes, and processed/failed per minute and per day",
            b.Dashboard,
            400,
            parameters=[
                _query("minutes", {**INT, "minimum": 1, "maximum": 120}, "default 60"),
                _query("days", {**INT, "minimum": 1, "maximum": 90}, "default 30"),
            ],
        ),
        "/api/queues": _get(
            "queues",
            "A page of the queues' figures, the busiest first",
            b.Queues,
            400,
            parameters=paging,
        ),
        "/api/queues/{name}/jobs": _get(
            "queue_jobs",
            "A page of the jobs waiting in a queue, the next to run first (or the newest)",
            b.QueueJobs,
            400,
            404,
            parameters=[
                *name,
                _query("offset", {**INT, "minimum": 0}, "default 0"),
                _query("limit", {**INT, "minimum": 1, "maximum": 500}, "default 25"),
                _query("order", {**STR, "enum": ["oldest", "newest"]}, "default oldest"),
            ],
        ),
        "/api/queues/{name}/stats": _get(
            "queue_stats",
            "A job name per UTC minute: processed, failed, mean run time",
            b.NameStats,
            400,
            404,
            parameters=[
                *name,
                _query("minutes", {**INT, "minimum": 1, "maximum": 120}, "default 60"),
            ],
        ),
        "/api/pools": _get("pools", "Live pools and their heartbeats", b.Pools),
        "/api/busy": _get("busy", "Jobs running now, from the running sets", b.Busy),
        "/api/cron": _get("cron", "Periodic jobs: next and last fire times", b.Cron),
        "/api/redis": _get("redis", "Redis server figures and round trip", b.Redis),
        "/api/jobs/{job_id}": _get(
            "job", "Everything about one job", "Job", 404, parameters=job_id
        ),
        "/api/audit": {
            "get": {
                "operationId": "audit",
                "summary": "The changes made through the web UI and the API, newest first",
                "parameters": paging,
                "responses": {
                    "200": {"description": "OK", "content": {"application/json": {"schema": {}}}},
                    **_errors(400),
                },
            }
        },
        "/api/jobs/{job_id}/args": _raw("args", "A job's args as stored (JSON text)"),
        "/api/jobs/{job_id}/result": _raw("result", "A job's result as stored (JSON text)"),
        "/api/jobs/{job_id}/abort": _post(
            "abort", "Abort a job", b.Aborted, 404, parameters=job_id
        ),
        "/api/groups/{group_id}": _get(
            "group",
            "A group's progress, its callback, and a page of its members",
            b.Group,
            400,
            404,
            parameters=[_path("group_id", ID_PATTERN), *paging],
        ),
        "/api/flows/{job_id}": _get(
            "flow",
            "The graph of the workflow a job belongs to (at most 200 jobs)",
            b.Flow,
            404,
            parameters=job_id,
        ),
        "/api/jobs": {
            "post": {
                "operationId": "enqueue",
                "summary": "Enqueue a job",
                "requestBody": _body(r.EnqueueRequest),
                "responses": {
                    "201": _json(b.Enqueued, "enqueued"),
                    "200": _json(b.Enqueued, "nothing new: the unique key is held"),
                    **_errors(400, 403, 413, 415, 422),
                },
            }
        },
    }
    for action, schema in (("pause", b.QueueState), ("resume", b.QueueState), ("clear", b.Cleared)):
        paths[f"/api/queues/{{name}}/{action}"] = _post(
            f"queue_{action}", f"{action.capitalize()} a queue", schema, 404, parameters=name
        )
    for action, what in (("enable", "on again"), ("disable", "off: its fire times pass")):
        paths[f"/api/cron/{{name}}/{action}"] = _post(
            f"cron_{action}",
            f"Turn a periodic job {what} (on every pool)",
            b.CronState,
            404,
            parameters=name,
        )
    paths["/api/queues/{name}/rate"] = _post(
        "queue_rate",
        "Set or remove the rate limit of a queue (across all pools)",
        b.QueueRate,
        400,
        404,
        415,
        422,
        parameters=name,
        requestBody=_body(r.RateRequest),
    )
    paths["/api/queues/{name}/limit"] = _post(
        "queue_limit",
        "Set or remove the concurrency limit of a queue (across all pools)",
        b.QueueLimit,
        400,
        404,
        415,
        422,
        parameters=name,
        requestBody=_body(r.LimitRequest),
    )
    for which in JOB_SETS:
        paths[f"/api/{which}"] = _get(
            f"list_{which}",
            f"A page of the {which} jobs, searchable by id and name",
            b.JobPage,
            400,
            parameters=[
                _query("offset", {**INT, "minimum": 0}, "default 0"),
                _query("limit", {**INT, "minimum": 1, "maximum": 500}, "default 25"),
                _query("q", {**STR, "maxLength": 200}, "part of a job id or name"),
            ],
        )
        for act, answer in (("retry", b.Retried), ("delete", b.Deleted)):
            if act == "retry" and which not in RETRYABLE:
                continue
            paths[f"/api/{which}/{act}"] = _post(
                f"{which}_{act}",
                f"{act.capitalize()} {which} jobs: some ids, or all",
                answer,
                400,
                404,
                415,
                422,
                requestBody=_body(r.Ids),
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
            "schemas": components(),
            "securitySchemes": {
                "basic": {"type": "http", "scheme": "basic"},
                "bearer": {"type": "http", "scheme": "bearer"},
            },
        },
        "security": [{}, {"basic": []}, {"bearer": []}],
    }
