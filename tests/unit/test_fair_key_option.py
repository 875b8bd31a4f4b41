"""The fair_key option: checked once, for the client, the CLI and the HTTP API alike."""

from __future__ import annotations

import pytest

from rota import JobSpec
from rota.client.spec import to_row
from rota.protocol.calls import batch_entry, enqueue_args
from rota.protocol.shards import shard_of, shard_of_row


def _row(**kw: object) -> object:
    return to_row(JobSpec(name="hook", **kw), 1 << 20, 60.0)  # type: ignore[arg-type]


def test_a_fair_key_goes_into_the_row_and_the_scripts_arguments() -> None:
    row = to_row(JobSpec(name="hook", fair_key="tenant-42"), 1 << 20, 60.0)
    assert row.fair == "tenant-42"
    assert enqueue_args(row)[-1] == "tenant-42" and len(enqueue_args(row)) == 14
    assert batch_entry(row)[-1] == "tenant-42" and len(batch_entry(row)) == 16
    plain = to_row(JobSpec(name="hook"), 1 << 20, 60.0)
    assert len(enqueue_args(plain)) == 4  # a job without a key sends what it sent


@pytest.mark.parametrize("key", ["", "a b", "x" * 201, "caf\u00e9", "tab\t", 42])
def test_a_bad_fair_key_is_refused_in_one_line_naming_it(key: object) -> None:
    with pytest.raises(ValueError, match=r"^fair_key must be 1 to 200 printable ASCII") as info:
        _row(fair_key=key)
    assert "\n" not in str(info.value)


def test_a_keyed_job_is_routed_by_its_key_unless_a_group_or_unique_key_says_otherwise() -> None:
    row = to_row(JobSpec(name="hook", fair_key="tenant-7"), 1 << 20, 60.0)
    assert shard_of_row(row, 4) == shard_of("tenant-7", 4)
    locked = to_row(JobSpec(name="hook", fair_key="tenant-7", unique="u-1"), 1 << 20, 60.0)
    assert shard_of_row(locked, 4) == shard_of("u-1", 4)
    member = row._replace(group="g-1")
    assert shard_of_row(member, 4) == shard_of("g-1", 4)
