"""A failure is blamed on what failed: the URL's own password on ``redis_url``, and the
application's own Redis (its lifespan's client) on the application, never on rota's
``redis_url``."""

from __future__ import annotations

import signal
from pathlib import Path
from urllib.parse import urlsplit

from tests.cli_helpers import rota_env, run_rota, start_worker
from tests.helpers import wait_until
from tests.redis_server import RedisServer, free_port


def test_a_wrong_password_in_the_url_is_blamed_on_the_url(redis_server: RedisServer) -> None:
    where = urlsplit(redis_server.url).netloc
    done = run_rota("status", "--redis-url", f"redis://nobody:s3cret@{where}/0")
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"rota: redis_url: Redis at redis://nobody:***@{where}/0 refused")
    assert "redis_password:" not in line and "s3cret" not in line


def test_the_apps_own_redis_failing_in_its_lifespan_is_the_apps(
    redis_server: RedisServer,
) -> None:
    """rota's Redis answers; the lifespan's own client cannot reach the application's:
    its traceback is shown (exit 1, not 2), naming the lifespan, and redis_url is not
    blamed."""
    app_url = f"redis://127.0.0.1:{free_port()}/0"
    env = rota_env(ROTA_REDIS_URL=redis_server.url, APP_REDIS_URL=app_url)
    done = run_rota("worker", "tests.cli_app:own_redis", env=env)
    assert done.returncode == 1, done.stderr
    assert "Traceback" in done.stderr and "redis.exceptions.ConnectionError" in done.stderr
    assert "raised by the pool's lifespan _app_redis" in done.stderr
    assert "rota: redis_url" not in done.stderr and "cannot connect to" not in done.stderr


async def test_the_apps_own_redis_failing_as_its_lifespan_ends_is_the_apps(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """The same at the end of the lifespan, after the pool stopped on SIGTERM."""
    app_url = f"redis://127.0.0.1:{free_port()}/0"
    env = rota_env(ROTA_REDIS_URL=redis_server.url, APP_REDIS_URL=app_url)
    log = tmp_path / "worker.log"
    proc = start_worker("tests.cli_app:own_redis_at_stop", env=env, log=log)
    try:
        await wait_until(lambda: b"pool started" in log.read_bytes(), within=60, every=0.05)
        proc.send_signal(signal.SIGTERM)
        await wait_until(lambda: proc.poll() is not None, within=60, every=0.05)
    finally:
        proc.kill()
    told = log.read_text()
    assert proc.returncode == 1, told
    assert "redis.exceptions.ConnectionError" in told, told
    assert "raised by the pool's lifespan _app_redis_at_stop, after the pool stopped" in told
    assert "rota: redis_url" not in told and "cannot connect to" not in told, told
