"""``rota keys``: list the fair keys of a name and act on one key, as a user types the
commands, on a real Redis; read back through ``client.admin``. Wrong words stop a
command with one line and exit code 2 before Redis is reached."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from rota import Client, JobSpec
from tests.cli_helpers import rota_env, run_rota
from tests.conftest import SHARDS

pytestmark = pytest.mark.timeout(120)

NOWHERE = ("--redis-url", "redis://127.0.0.1:1/0")  # refused before a connection is tried


@pytest.fixture
def conn(redis_url: str, namespace: str) -> tuple[str, ...]:
    return ("--redis-url", redis_url, "--namespace", namespace)


async def _rota(*args: str) -> str:
    """``rota ARGS`` over the tests' shards (no pool recorded the count), from a thread."""
    env = rota_env(ROTA_SHARDS=str(SHARDS))
    done = await anyio.to_thread.run_sync(lambda: run_rota(*args, env=env))
    assert done.returncode == 0, done.stderr
    return done.stdout


async def _json(*args: str) -> object:
    return msgspec.json.decode(await _rota(*args, "--json"))


async def test_list_and_act_on_one_key(conn: tuple[str, ...], client: Client) -> None:
    counts = {"big": 5, "mid": 3, "odd'<key>": 1}
    await client.enqueue_many(
        JobSpec(name="hook", args=(i,), fair_key=k) for k, n in counts.items() for i in range(n)
    )
    assert await _rota("keys", "pause", "hook", "big", *conn) == "paused big of hook\n"
    assert await _json("keys", "limit", "hook", "big", "2", *conn) == {
        "name": "hook",
        "key": "big",
        "limit": 2,
    }
    assert "at most 4 at once" in await _rota("keys", "limit", "hook", "--default", "4", *conn)
    assert await _rota("keys", "weight", "hook", "mid", "3", *conn) == "mid of hook: weight 3\n"
    assert "at most 10/s" in await _rota("keys", "rate", "hook", "mid", "10/s", *conn)
    listed = await _json("keys", "list", "hook", "--top", "2", *conn)
    assert isinstance(listed, dict) and listed["default_limit"] == 4
    rows = [
        (r["key"], r["queued"], r["limit"], r["weight"], r["paused"], r["rate"])
        for r in listed["keys"]
    ]
    assert rows == [("big", 5, 2, 1, True, None), ("mid", 3, 4, 3, False, "10/s")]
    text = await _rota("keys", "list", "hook", *conn)  # piped: tab-separated
    assert "# fair keys of hook (default limit: 4)" in text and "odd'<key>\t1\t0\t4\t1" in text
    assert await _rota("keys", "resume", "hook", "big", *conn) == "resumed big of hook\n"
    assert "no limit" in await _rota("keys", "limit", "hook", "big", "none", *conn)
    assert "no rate" in await _rota("keys", "rate", "hook", "mid", "none", *conn)
    assert await _json("keys", "clear", "hook", "mid", "-y", *conn) == {
        "name": "hook",
        "key": "mid",
        "deleted": 3,
    }
    rows2 = {r.key: r for r in await client.admin.fair.of("hook")}
    assert set(rows2) == {"big", "odd'<key>"}
    assert (rows2["big"].paused, rows2["big"].limit) == (False, 4)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("limit", "hook", "k", "0"), "limit"),
        (("limit", "hook", "k", "many"), "LIMIT: expected a whole number or none"),
        (("weight", "hook", "k", "1001"), "weight"),
        (("rate", "hook", "k", "fast"), "rate"),
        (("pause", "hook", "with space"), "KEY must be 1 to 200 printable ASCII"),
        (("pause", "no such name!", "k"), "name"),
        (("limit", "hook", "k"), "give KEY N, or --default and N"),
        (("list", "hook", "--top", "0"), "--top"),
    ],
)
def test_wrong_words_are_one_line_and_exit_2(args: tuple[str, ...], said: str) -> None:
    done = run_rota("keys", *args, *NOWHERE)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], done.stderr


async def test_one_keys_jobs_the_next_to_run_first(conn: tuple[str, ...], client: Client) -> None:
    done = await client.enqueue_many(
        JobSpec(name="hook", args=(i,), fair_key="t") for i in range(5)
    )
    ids = [job.id for job in done]
    page = await _json("keys", "jobs", "hook", "t", "--offset", "1", "--count", "2", *conn)
    assert isinstance(page, dict) and (page["queued"], page["running"]) == (5, 0)
    assert [j["id"] for j in page["jobs"]] == ids[1:3]
    text = await _rota("keys", "jobs", "hook", "t", *conn)  # piped: tab-separated
    assert "# jobs of t of hook (5 queued, 0 running)" in text
    assert f"1\t{ids[0]}\tqueued" in text and f"5\t{ids[4]}\tqueued" in text
    done_bad = await anyio.to_thread.run_sync(
        lambda: run_rota("keys", "jobs", "hook", "t", "--count", "1001", *conn)
    )
    assert done_bad.returncode == 2 and "--count" in done_bad.stderr
