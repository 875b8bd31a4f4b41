"""rota over TLS, with client certificates and ACL users, on a redis-server that has
only a TLS port (so whatever works here went over TLS).

The hot-path link copies TLS and the ACL user from the redis-py client; a pool under the
worker role runs jobs through enqueue, retry, dead and schedule; the web UI and the CLI
work with the same settings; a wrong CA, a wrong password and a refused command each
stop the CLI and the worker with one line that names the setting, without the password.
"""

from __future__ import annotations

import functools
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import msgspec
import pytest

from rota import Client, JobContext, Settings, State, WorkerPool
from rota.acl import rules
from rota.protocol.keys import Keys
from rota.web import create_app
from tests.cli_helpers import REPO, rota_env, run_rota
from tests.helpers import link_of, pool_settings, wait_until
from tests.tls import Certificates, TLSRedisServer, make_certificates, tls_supported

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def server(certs: Certificates) -> Iterator[TLSRedisServer]:
    if not tls_supported():  # the wheels' Redis 6.2 and Valkey 8 are built without it
        pytest.skip("this redis-server is built without TLS")
    with TLSRedisServer(certs) as s:
        yield s


def user_of(server: TLSRedisServer, role: str, namespace: str) -> tuple[str, str]:
    user, password = f"{role}-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    with server.client() as admin:
        admin.execute_command(
            "ACL", "SETUSER", user, "reset", "on", f">{password}", *rules(role, namespace)
        )
    return user, password


def tls_settings(
    server: TLSRedisServer, namespace: str, tmp_path: Path, role: str = "worker", **changes: object
) -> Settings:
    """Settings of a ``role`` user: TLS files and a password file, as a container has them."""
    user, password = user_of(server, role, namespace)
    secret = tmp_path / f"{user}.password"
    secret.write_text(password + "\n")
    c = server.certs
    return pool_settings(
        server.url,
        namespace,
        redis_tls_ca=str(c.ca),
        redis_tls_cert=str(c.client_cert),
        redis_tls_key=str(c.client_key),
        redis_username=user,
        redis_password_file=str(secret),
        keep_result=60,
        **changes,
    )


def tls_env(settings: Settings) -> dict[str, str]:
    values = msgspec.structs.asdict(settings)
    names = ("redis_url", "namespace", "redis_username", "redis_password_file",
             "redis_tls_ca", "redis_tls_cert", "redis_tls_key")  # fmt: skip
    return rota_env(**{"ROTA_" + n.upper(): str(values[n]) for n in names if values[n]})


@pytest.fixture
async def admin(server: TLSRedisServer, namespace: str) -> AsyncIterator[Client]:
    async with Client.from_url(server.url_with_files(), namespace) as c:
        yield c


async def _state(client: Client, job_id: str, state: State) -> bool:
    record = await client.job(job_id)
    return record is not None and record.state == state


async def test_the_link_speaks_tls_and_authenticates_as_the_acl_user(
    server: TLSRedisServer, namespace: str, tmp_path: Path
) -> None:
    settings = tls_settings(server, namespace, tmp_path)
    async with Client.from_settings(settings) as client:
        link = link_of(client)
        assert link is not None and link.ssl_context is not None
        assert link.username == settings.redis_username
        whoami = await link.execute_command("ACL", "WHOAMI")
        assert whoami.decode() == settings.redis_username
        job = await client.enqueue("x")  # the hot path: FCALL over the link
        assert job.created
    # The same from redis-py's own URL query parameters and user:password in the URL.
    user, password = user_of(server, "worker", namespace)
    async with Client.from_url(server.url_with_files(user, password), namespace) as client:
        link = link_of(client)
        assert link is not None and link.ssl_context is not None
        assert (await link.execute_command("ACL", "WHOAMI")).decode() == user


async def test_a_pool_under_the_worker_role_runs_jobs_over_tls(
    server: TLSRedisServer, namespace: str, tmp_path: Path, admin: Client
) -> None:
    pool = WorkerPool(settings=tls_settings(server, namespace, tmp_path))
    tries: list[int] = []

    @pool.job()
    async def add(ctx: JobContext, a: int, b: int) -> int:
        return a + b

    @pool.job(max_fails=3, backoff=lambda n: 0.05)
    async def flaky(ctx: JobContext) -> str:
        tries.append(ctx.attempt)
        if ctx.attempt < 2:
            raise RuntimeError("once")
        return "ok"

    @pool.job(max_fails=2, backoff=lambda n: 0.05)
    async def broken(ctx: JobContext) -> None:
        raise RuntimeError("always")

    producer = tls_settings(server, namespace, tmp_path, role="producer")
    async with pool.running(), Client.from_settings(producer) as client:
        jobs = [await client.enqueue("add", i, i) for i in range(50)]
        later = await client.enqueue_in(0.3, "add", 20, 22)
        retried = await client.enqueue("flaky")
        dead = await client.enqueue("broken")
        for job in [*jobs, later, retried]:
            await wait_until(functools.partial(_state, admin, job.id, State.COMPLETE), within=20)
        await wait_until(lambda: _state(admin, dead.id, State.DEAD), within=20)
    record = await admin.job(later.id)
    assert record is not None and record.result == "42"
    assert tries == [1, 2]
    assert (await admin.admin.stats())["processed"] >= 52


async def test_the_web_ui_runs_over_tls(
    server: TLSRedisServer, namespace: str, tmp_path: Path, admin: Client
) -> None:
    await admin.enqueue("shown")
    app = create_app(tls_settings(server, namespace, tmp_path, role="web"))
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:5040") as http,
    ):
        assert (await http.get("/healthz")).status_code == 200
        queues = await http.get("/api/queues")
        assert [q["name"] for q in queues.json()["queues"]] == ["shown"]
        assert (await http.get("/queues", headers={"accept": "text/html"})).status_code == 200


def test_the_cli_runs_over_tls_and_says_what_is_wrong(
    server: TLSRedisServer, namespace: str, tmp_path: Path
) -> None:
    settings = tls_settings(server, namespace, tmp_path, role="web-operator")
    env = tls_env(settings)
    done = run_rota("enqueue", "greet", "who=ada", env=env)
    assert done.returncode == 0, done.stderr
    done = run_rota("status", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert "greet" in done.stdout

    wrong_ca = run_rota("status", env={**env, "ROTA_REDIS_TLS_CA": str(server.certs.other_ca)})
    assert wrong_ca.returncode == 2
    assert wrong_ca.stderr.startswith("rota: redis_tls_ca: ")
    assert "CERTIFICATE_VERIFY_FAILED" in wrong_ca.stderr

    password = tmp_path / "wrong"
    password.write_text("not-the-password-42")
    wrong = run_rota("status", env={**env, "ROTA_REDIS_PASSWORD_FILE": str(password)})
    assert wrong.returncode == 2
    assert wrong.stderr.startswith("rota: redis_password: ")
    assert "not-the-password-42" not in wrong.stderr + wrong.stdout

    with server.client() as admin:
        admin.zadd(Keys(namespace).dead, {"gone": 1})
    producer = tls_env(tls_settings(server, namespace, tmp_path, role="producer"))
    refused = run_rota("dead", "delete", "--all", "--yes", env=producer)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("rota: redis_username: "), refused.stderr
    assert "docs/operations.md" in refused.stderr
    for done in (wrong_ca, wrong, refused):
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_worker_stops_at_once_on_a_certificate_it_cannot_trust(
    server: TLSRedisServer, namespace: str, tmp_path: Path
) -> None:
    settings = tls_settings(server, namespace, tmp_path)
    env = {**tls_env(settings), "ROTA_REDIS_TLS_CA": str(server.certs.other_ca)}
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "rota", "worker", "tests.cli_app:pool"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("rota: redis_tls_ca: ")
    assert "Traceback" not in done.stderr
