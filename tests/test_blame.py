"""A failure is blamed on what failed: the URL's own password on ``redis_url``, and the
application's own Redis (its lifespan's client) on the application, never on rota's
``redis_url``."""

from __future__ import annotations

from urllib.parse import urlsplit

from tests.cli_helpers import rota_env, run_rota
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
