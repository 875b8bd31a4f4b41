"""Fixtures of the topology tests: Sentinel and Cluster deployments, a ledger, workers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

# The ledger and the worker processes are the chaos suite's.
from tests.chaos.conftest import fleet, ledger  # noqa: F401
from tests.topology_servers import ClusterGroup, SentinelGroup


@pytest.fixture
def sentinel_group() -> Iterator[SentinelGroup]:
    with SentinelGroup() as group:
        yield group


@pytest.fixture
def cluster_group() -> Iterator[ClusterGroup]:
    with ClusterGroup() as group:
        yield group


@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterGroup]:
    """Three primaries without replicas, shared by the tests of one module."""
    with ClusterGroup(replicas=0) as group:
        yield group
