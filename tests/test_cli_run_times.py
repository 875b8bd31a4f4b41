"""``rota queue run-times NAME``: the hour's (or --day's) percentiles and histogram of a
job name, as a table or JSON, read over every shard of the namespace."""

from __future__ import annotations

import json
import time

from rota import Client
from tests.cli_helpers import rota_env, run_rota
from tests.conftest import SHARDS
from tests.test_run_times import finish_with_run_times


async def test_run_times_prints_the_percentiles_and_the_histogram(
    client: Client, redis_url: str, namespace: str
) -> None:
    now = int(time.time() * 1000)
    await finish_with_run_times(client, "mail", [40] * 10 + [200] * 9 + [3000], now_ms=now)
    conn = ("--redis-url", redis_url, "--namespace", namespace)
    env = rota_env(ROTA_SHARDS=str(SHARDS))

    done = run_rota("queue", "run-times", "mail", *conn, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == [
        "# Run times of mail, last hour",
        "attempts\tp50\tp95\tp99\tslowest",
        "20\t<= 58 ms\t<= 292 ms\t<= 3326 ms\t<= 3326 ms",
    ]
    assert lines[3:6] == ["# Histogram", "up to\tattempts\t", "<= 58 ms\t10\t" + "#" * 40]
    assert "<= 292 ms\t9\t" + "#" * 36 in lines

    done = run_rota("queue", "run-times", "mail", "--day", "--json", *conn, env=env)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert (data["window"], data["count"], data["p99_ms"]) == ("day", 20, 3326)


def test_run_times_refuses_a_bad_name(redis_url: str, namespace: str) -> None:
    done = run_rota("queue", "run-times", "a b", "--redis-url", redis_url, "--namespace", namespace)
    assert done.returncode != 0
    assert "invalid job name 'a b'" in done.stderr
