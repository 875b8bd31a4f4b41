"""The short server matrix inside the one parallel run of `make test`.

``--matrix-servers "redis-6.2 valkey-8"`` with ``--matrix-tests "tests/test_queues.py
..."`` runs each test of those files once more per server of tests/servers.py: its
``ROTA_TEST_REDIS_SERVER`` names that server's binary for the test, so every server the
test starts itself is of that kind, and its ``redis_server`` is one of that kind too. The
variants run among the rest of the suite, keeping every test process busy, instead of
in serial runs after it. `make test-matrix` still runs the long form, a run per server.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import servers

DEFAULT = servers.DEFAULT


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rota", "rota's server matrix")
    group.addoption(
        "--matrix-servers",
        default="",
        metavar="NAMES",
        help="also run --matrix-tests on these servers (space-separated: redis-6.2 valkey-8)",
    )
    group.addoption(
        "--matrix-tests",
        default="",
        metavar="FILES",
        help="the test files --matrix-servers runs again (space-separated)",
    )


def _names(config: pytest.Config) -> list[str]:
    return str(config.getoption("matrix_servers")).split()


def pytest_configure(config: pytest.Config) -> None:
    """Fetch the binaries once, before the test processes start and find them cached."""
    for name in _names(config):
        if name not in servers.SERVERS:
            raise pytest.UsageError(f"--matrix-servers: no server {name!r} in tests/servers.py")
        servers.server_binary(name)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = _names(metafunc.config)
    if not names:
        return
    root = metafunc.config.rootpath
    files = {(root / f).resolve() for f in str(metafunc.config.getoption("matrix_tests")).split()}
    if Path(metafunc.definition.path).resolve() not in files:
        return
    for name, defs in metafunc._arg2fixturedefs.items():
        if defs and defs[-1].scope in ("module", "class", "package"):
            raise pytest.UsageError(
                f"{metafunc.definition.nodeid}: its {name} is set up once per {defs[-1].scope},"
                " so it cannot change servers: run it with `make test-matrix`"
            )
    # redis_server is shared by the process: here it is per test, for it changes servers
    argnames = ["matrix_server"]
    if "redis_server" in metafunc.fixturenames:
        argnames.append("redis_server")
    variants = [pytest.param(*[name] * len(argnames), id=name) for name in [DEFAULT, *names]]
    metafunc.parametrize(argnames, variants, indirect=True, scope="function")


@pytest.fixture(autouse=True)
def matrix_server(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The matrix server this test runs on (:data:`DEFAULT` outside the matrix)."""
    name: str = getattr(request, "param", DEFAULT)
    if name != DEFAULT:
        monkeypatch.setenv("ROTA_TEST_REDIS_SERVER", servers.matrix_binary(name))
    return name
