"""A private certificate authority and a redis-server that speaks only TLS.

The certificates are made by the ``openssl`` command line (always there beside a
redis-server built with TLS): a CA, a server certificate for 127.0.0.1 and localhost,
and a client certificate, since the server asks every client for one
(``--tls-auth-clients yes``). The server listens on its TLS port only (``--port 0``), so
a connection that works went over TLS.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import redis

from tests.redis_server import RedisServer, free_port


@dataclass(frozen=True)
class Certificates:
    """Paths of the CA, the server's and a client's certificate and key."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing of this server: verification fails with it


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(directory: Path, name: str) -> None:
    _openssl("genrsa", "-out", f"{name}.key", "2048", cwd=directory)
    _openssl(
        "req", "-x509", "-new", "-key", f"{name}.key", "-sha256", "-days", "2",
        "-subj", f"/CN=rota test {name}", "-out", f"{name}.crt",
        cwd=directory,
    )  # fmt: skip


def _signed(directory: Path, name: str, extensions: str) -> None:
    _openssl("genrsa", "-out", f"{name}.key", "2048", cwd=directory)
    _openssl(
        "req", "-new", "-key", f"{name}.key", "-subj", f"/CN=rota test {name}",
        "-out", f"{name}.csr",
        cwd=directory,
    )  # fmt: skip
    (directory / f"{name}.ext").write_text(extensions)
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-sha256", "-extfile", f"{name}.ext",
        "-out", f"{name}.crt",
        cwd=directory,
    )  # fmt: skip


def make_certificates(directory: Path) -> Certificates:
    if shutil.which("openssl") is None:
        raise RuntimeError("openssl not found on PATH: install it (apt-get install openssl)")
    directory.mkdir(parents=True, exist_ok=True)
    _ca(directory, "ca")
    _ca(directory, "other")
    _signed(
        directory,
        "server",
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "extendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n",
    )
    _signed(
        directory,
        "client",
        "extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n",
    )
    for key in directory.glob("*.key"):
        key.chmod(0o600)
    return Certificates(
        ca=directory / "ca.crt",
        server_cert=directory / "server.crt",
        server_key=directory / "server.key",
        client_cert=directory / "client.crt",
        client_key=directory / "client.key",
        other_ca=directory / "other.crt",
    )


def tls_supported(binary: str | None = None) -> bool:
    """Whether the server binary the tests run (``ROTA_TEST_REDIS_SERVER``, else
    redis-server) was built with TLS. Asked for a TLS port with certificate files that do
    not exist, one built without it says it knows no TLS (Valkey) or no such directive
    (Redis); one built with it complains about the files instead."""
    binary = binary or os.environ.get("ROTA_TEST_REDIS_SERVER") or "redis-server"
    command = [
        binary, "--port", "0", "--tls-port", str(free_port()), "--save", "", "--logfile", "",
        "--tls-cert-file", "/nonexistent/c", "--tls-key-file", "/nonexistent/k",
    ]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=5, check=False)
    except subprocess.TimeoutExpired:
        return True
    said = done.stdout + done.stderr
    return "Failed finding TLS support" not in said and "Bad directive" not in said


class TLSRedisServer(RedisServer):
    """A private redis-server on a TLS port only, asking clients for a certificate."""

    def __init__(self, certs: Certificates, extra_args: tuple[str, ...] = ()) -> None:
        self.certs = certs
        super().__init__(extra_args)

    def _command(self) -> list[str]:
        command = super()._command()
        at = command.index("--port")
        command[at : at + 2] = ["--port", "0", "--tls-port", str(self.port)]
        c = self.certs
        return [
            *command,
            "--tls-cert-file", str(c.server_cert),
            "--tls-key-file", str(c.server_key),
            "--tls-ca-cert-file", str(c.ca),
            "--tls-auth-clients", "yes",
        ]  # fmt: skip

    @property
    def url(self) -> str:
        return f"rediss://127.0.0.1:{self.port}/0"

    def url_with_files(self, user: str | None = None, password: str | None = None) -> str:
        """The URL carrying the TLS files as redis-py's query parameters."""
        c = self.certs
        who = ""
        if password is not None:
            who = f"{quote(user or '', safe='')}:{quote(password, safe='')}@"
        return (
            f"rediss://{who}127.0.0.1:{self.port}/0?ssl_ca_certs={c.ca}"
            f"&ssl_certfile={c.client_cert}&ssl_keyfile={c.client_key}&ssl_cert_reqs=required"
        )

    def client(self, **kwargs: object) -> redis.Redis:
        options: dict[str, object] = {
            "ssl": True,
            "ssl_ca_certs": str(self.certs.ca),
            "ssl_certfile": str(self.certs.client_cert),
            "ssl_keyfile": str(self.certs.client_key),
        }
        options.update(kwargs)
        return super().client(**options)
