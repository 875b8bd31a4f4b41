"""The producer's Client and the operator's Admin apart: the operator's methods live on
``client.admin``; those documented on Client before keep an alias for one release that
warns and answers as Admin's."""

from __future__ import annotations

import inspect

import pytest

import rota
from rota import Admin, Client
from rota.client.methods import MOVED

#: The producer's methods (and constructors): what Client offers besides ``admin``.
PRODUCER = {
    "abort",
    "chain",
    "close",
    "enqueue",
    "enqueue_at",
    "enqueue_in",
    "enqueue_many",
    "follow_primary",
    "from_settings",
    "from_url",
    "group",
    "group_progress",
    "job",
    "job_log",
    "wait",
}


def test_the_client_offers_the_producer_s_methods_and_the_deprecated_aliases_only() -> None:
    public = {n for n, m in inspect.getmembers(Client, callable) if not n.startswith("_")}
    assert public == PRODUCER | set(MOVED)
    assert set(MOVED) <= {n for n, _ in inspect.getmembers(Admin, inspect.iscoroutinefunction)}
    assert isinstance(Client.admin, property) and "Admin" in rota.__all__


async def test_an_operator_s_method_on_the_client_warns_and_answers_as_admin_s(
    client: Client,
) -> None:
    await client.enqueue("work")
    with pytest.warns(
        DeprecationWarning, match=r"Client\.pause is deprecated: use client\.admin\.pause"
    ):
        await client.pause("work")  # type: ignore[attr-defined]
    (info,) = await client.admin.queues(["work"])
    assert info.paused and info.size == 1
    with pytest.warns(DeprecationWarning, match=r"client\.admin\.queues"):
        (again,) = await client.queues(["work"])  # type: ignore[attr-defined]
    assert (again.name, again.size, again.paused) == ("work", 1, True)


@pytest.mark.parametrize("name", MOVED)
async def test_each_alias_warns_and_hands_its_call_to_admin_s_method_of_its_name(
    client: Client, name: str
) -> None:
    """Not only the two above: an alias that warned but called another Admin method (or
    none) would be caught here, by the call Admin's method itself refuses."""
    with (
        pytest.warns(
            DeprecationWarning,
            match=rf"\AClient\.{name} is deprecated: use client\.admin\.{name}\Z",
        ),
        pytest.raises(TypeError, match=rf"\AAdmin\.{name}\(\) got an unexpected keyword argument"),
    ):
        await getattr(client, name)(not_an_argument=1)
