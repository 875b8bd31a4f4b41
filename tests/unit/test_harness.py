"""The suite's own harness: each test gets a namespace of its own."""

from __future__ import annotations


def test_namespace_is_unique(namespace: str) -> None:
    assert namespace.startswith("t")
    assert len(namespace) == 13
