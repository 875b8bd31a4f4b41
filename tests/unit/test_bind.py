"""Binding a call to a handler: signatures a struct cannot mirror take the slow path."""

from __future__ import annotations

from rota.worker.registry import Handler


def test_signatures_a_struct_cannot_mirror_take_the_slow_path() -> None:
    async def star(*args: int) -> None: ...

    async def mutable_default(a: int, xs: list[int] = []) -> None: ...  # noqa: B006

    for f in (star, mutable_default):
        h = Handler(name=f.__name__, func=f)
        assert h._shape is None
    assert Handler(name="m", func=mutable_default).bind([1]) == ((1,), {})
