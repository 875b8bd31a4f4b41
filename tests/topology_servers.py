"""Real Sentinel and Cluster deployments on loopback ports, for the topology tests.

:class:`SentinelGroup`: a primary, a replica and three ``redis-sentinel`` processes
(Debian's package: installed here when running as root, else the tests skip with a
message). :class:`ClusterGroup`: three primaries and three replicas joined by
``redis-cli --cluster create`` (or more primaries, for the scale benchmarks). Every
server is a :class:`tests.redis_server.RedisServer` (a temporary directory, no
snapshots), so killing one with SIGKILL is a test step.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import pytest
import redis

from tests.redis_server import RedisServer, free_port

SERVICE = "rotamaster"


def _poll(check: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while True:
        try:
            if check():
                return
        except redis.RedisError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {within} s")
        time.sleep(0.05)


def sentinel_binary() -> str:
    """``redis-sentinel``, installed from Debian when missing and running as root; the
    test skips otherwise."""
    found = shutil.which("redis-sentinel")
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(
            ["apt-get", "install", "-y", "-q", "redis-sentinel"],
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
            capture_output=True,
            check=False,
            timeout=300,
        )
        found = shutil.which("redis-sentinel")
    if found is None:
        pytest.skip("redis-sentinel not found: install it (Debian: apt-get install redis-sentinel)")
    return found


class Sentinel:
    """One ``redis-sentinel`` process with its own (rewritable) config file."""

    def __init__(self, binary: str, primary_port: int, quorum: int) -> None:
        self.port = free_port()
        self._tmp = tempfile.TemporaryDirectory(prefix="rota-sentinel-")
        conf = Path(self._tmp.name) / "sentinel.conf"
        conf.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndaemonize no\n"
            f"dir {self._tmp.name}\nlogfile {self._tmp.name}/sentinel.log\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {primary_port} {quorum}\n"
            f"sentinel down-after-milliseconds {SERVICE} 1000\n"
            f"sentinel failover-timeout {SERVICE} 4000\n"
            f"sentinel parallel-syncs {SERVICE} 1\n"
        )
        self.proc = subprocess.Popen(
            [binary, str(conf)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _poll(self._pong, 10, f"sentinel on port {self.port} answering")

    def _pong(self) -> bool:
        with redis.Redis(port=self.port, socket_timeout=0.5, socket_connect_timeout=0.5) as r:
            return bool(r.ping())

    def master(self) -> tuple[str, int] | None:
        with redis.Redis(port=self.port, socket_timeout=1, decode_responses=True) as r:
            reply = r.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
        return (reply[0], int(reply[1])) if reply else None

    def events(self) -> list[str]:
        """What this sentinel logged of the group's roles: its view of failures
        (``+sdown``, ``+odown``), failovers and the primary it names."""
        log = Path(self._tmp.name) / "sentinel.log"
        marks = ("down", "failover", "switch-master", "promoted", "convert", "slave", "tilt")
        try:
            lines = log.read_text(errors="replace").splitlines()
        except OSError:
            return []
        return [line for line in lines if any(m in line for m in marks)]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._tmp.cleanup()


class SentinelGroup:
    """A primary, one replica and three sentinels (quorum 2)."""

    def __init__(self) -> None:
        binary = sentinel_binary()
        self.servers: list[RedisServer] = []
        self.sentinels: list[Sentinel] = []
        try:
            primary = RedisServer()
            self.servers.append(primary)
            replica = RedisServer(["--replicaof", "127.0.0.1", str(primary.port)])
            self.servers.append(replica)
            _poll(lambda: _link_up(replica), 15, "the replica in sync")
            self.sentinels = [Sentinel(binary, primary.port, 2) for _ in range(3)]
            _poll(self._all_know_the_replica, 15, "the sentinels seeing the replica")
        except BaseException:
            self.close()
            raise

    def _all_know_the_replica(self) -> bool:
        for s in self.sentinels:
            with redis.Redis(port=s.port, socket_timeout=1) as r:
                if not r.execute_command("SENTINEL", "REPLICAS", SERVICE):
                    return False
        return True

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{SERVICE}"

    def primary(self) -> RedisServer:
        """The server the sentinels name as primary now."""
        addr = self.sentinels[0].master()
        return next(s for s in self.servers if addr and s.port == addr[1])

    def wait_failover(self, old: RedisServer, within: float = 30) -> RedisServer:
        """The new primary, once every sentinel names it and it takes writes."""

        def moved() -> bool:
            addrs = {s.master() for s in self.sentinels}
            if len(addrs) != 1 or None in addrs or ("127.0.0.1", old.port) in addrs:
                return False
            new = self.primary()
            with new.client(socket_timeout=1) as r:
                return str(r.info("replication")["role"]) == "master"

        _poll(moved, within, "the sentinels failing over")
        return self.primary()

    def rejoin(self, old: RedisServer, new: RedisServer) -> None:
        """Start ``old`` (a killed primary) again as ``new``'s replica.

        It keeps nothing on disk, so it comes back empty. Started with its first
        configuration (a primary) it would be an empty primary, on an address the group
        knows, until a sentinel converts it about ten seconds later; a server that
        replicates from it meanwhile is emptied, durable writes and all. Redis's advice
        for a server without persistence is that it must not come back as a primary by
        itself: an operator brings it back as a replica of the new primary, as here.

        And with ``replica-priority 0``, so that no failover promotes it: until its first
        sync it is empty, and a sentinel does not hold a replica's link against it when
        that link never came up. Were the new primary judged down (one second without
        an answer, on a loaded host) while ``old`` syncs, ``old`` would be the only
        replica to promote, and the new primary, converted to its replica, would be
        emptied by a full sync."""
        old.extra_args = [
            *old.extra_args,
            *("--replicaof", "127.0.0.1", str(new.port)),
            *("--replica-priority", "0"),
        ]
        old.start()

    def events(self) -> str:
        """Each sentinel's log of failures, failovers and roles (for a failure's message)."""
        return "\n".join(
            f"--- sentinel {s.port}\n" + "\n".join(s.events()[-40:]) for s in self.sentinels
        )

    def close(self) -> None:
        for s in self.sentinels:
            s.close()
        for server in self.servers:
            server.close()

    def __enter__(self) -> SentinelGroup:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _cluster_port() -> int:
    """A free port whose cluster bus port (10,000 higher) is a port, and free too."""
    while True:
        port = free_port()
        if port > 55535:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


def _link_up(replica: RedisServer) -> bool:
    with replica.client(socket_timeout=1) as r:
        return bool(r.info("replication").get("master_link_status") == "up")


class ClusterGroup:
    """Three primaries (or ``primaries``, at least the three ``redis-cli`` asks for) with
    one replica each (or ``replicas``), made by ``redis-cli --cluster create``. The slots
    are shared out evenly in port order of creation; the time allowed to join and agree
    grows with the nodes (a node learns of the others by gossip, a few at a time)."""

    def __init__(self, node_timeout_ms: int = 2000, replicas: int = 1, primaries: int = 3) -> None:
        if primaries < 3:
            raise ValueError(f"a cluster needs 3 primaries or more, not {primaries}")
        self.servers: list[RedisServer] = []
        nodes = primaries * (1 + replicas)
        within = 30 + nodes  # seconds: about 1 s per node on a loaded 2-core host
        try:
            for _ in range(nodes):
                self.servers.append(
                    RedisServer(
                        port=_cluster_port(),
                        extra_args=[
                            "--cluster-enabled",
                            "yes",
                            "--cluster-config-file",
                            "nodes.conf",
                            "--cluster-node-timeout",
                            str(node_timeout_ms),
                            # A replica may fail over however long ago it last heard
                            # from its primary: the tests kill primaries on purpose.
                            "--cluster-replica-validity-factor",
                            "0",
                        ],
                    )
                )
            subprocess.run(
                [
                    "redis-cli",
                    "--cluster",
                    "create",
                    *(f"127.0.0.1:{s.port}" for s in self.servers),
                    "--cluster-replicas",
                    str(replicas),
                    "--cluster-yes",
                ],
                check=True,
                capture_output=True,
                timeout=30 + within,
            )
            _poll(self.ok, within, "the cluster state ok on every node")
            _poll(self._replicas_in_sync, within, "every replica in sync with its primary")
        except BaseException:
            self.close()
            raise

    def ok(self) -> bool:
        for s in self.servers:
            if not s.running:
                continue
            try:
                with s.client(socket_timeout=1) as r:
                    info = r.execute_command("CLUSTER", "INFO").decode()
            except redis.RedisError:
                return False
            if "cluster_state:ok" not in info:
                return False
        return True

    def _replicas_in_sync(self) -> bool:
        for s in self.servers:
            with s.client(socket_timeout=1) as r:
                info = r.info("replication")
            if info.get("role") == "slave" and info.get("master_link_status") != "up":
                return False
        return True

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"127.0.0.1:{s.port}" for s in self.servers[:3])

    def by_port(self, port: int) -> RedisServer:
        return next(s for s in self.servers if s.port == port)

    def owner(self, slot: int) -> RedisServer:
        """The primary that serves ``slot``, as a live node says."""
        for s in self.servers:
            if not s.running:
                continue
            with s.client(socket_timeout=1) as r:
                for start, end, primary, *_ in r.execute_command("CLUSTER", "SLOTS"):
                    if start <= slot <= end:
                        return self.by_port(int(primary[1]))
        raise RuntimeError(f"no node serves slot {slot}")

    def node_id(self, server: RedisServer) -> str:
        with server.client(socket_timeout=1) as r:
            return str(r.execute_command("CLUSTER", "MYID").decode())

    def replica_of(self, primary: RedisServer) -> RedisServer:
        pid = self.node_id(primary)
        for s in self.servers:
            if s is primary or not s.running:
                continue
            with s.client(socket_timeout=1) as r:
                info = r.info("replication")
                if info.get("role") == "slave" and int(info["master_port"]) == primary.port:
                    return s
        raise RuntimeError(f"no replica of {pid}")

    def close(self) -> None:
        for s in self.servers:
            s.close()

    def __enter__(self) -> ClusterGroup:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
