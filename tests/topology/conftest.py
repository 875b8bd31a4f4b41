"""Fixtures of the topology tests: Sentinel and Cluster deployments, a ledger, workers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.harness import Fleet, Ledger
from tests.topology_servers import ClusterGroup, SentinelGroup


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    return Ledger(tmp_path / "ledger.txt")


@pytest.fixture
def fleet(tmp_path: Path, ledger: Ledger) -> Iterator[Fleet]:
    """Worker processes; every one still running is killed when the test ends."""
    f = Fleet(tmp_path, ledger)
    try:
        yield f
    finally:
        f.close()


@pytest.fixture
def sentinel_group() -> Iterator[SentinelGroup]:
    with SentinelGroup() as group:
        yield group


@pytest.fixture
def cluster_group() -> Iterator[ClusterGroup]:
    with ClusterGroup() as group:
        yield group
