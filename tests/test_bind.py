"""The typed-handler fast path of ``Handler.bind`` agrees with ``inspect``'s binding."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rota.errors import InvalidArgs
from rota.worker.registry import Handler


class Point(msgspec.Struct):
    x: int
    y: int


async def positional(a: int, b: str = "x", c: float | None = None) -> None: ...


async def keyword_only(a: int, *, flag: bool = False) -> None: ...


async def nested(p: Point, tags: list[str], extra: dict[str, int] | None = None) -> None: ...


async def with_ctx(ctx: Any, n: int) -> None: ...


HANDLERS = [Handler(name=f.__name__, func=f) for f in (positional, keyword_only, nested, with_ctx)]

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False)
    | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("xy"), inner),
    max_leaves=6,
)
names = st.sampled_from(["a", "b", "c", "flag", "p", "tags", "extra", "n", "zz"])
payloads = st.lists(values, max_size=4) | st.dictionaries(names, values, max_size=4)


def _outcome(h: Handler, args: Any) -> tuple[str, Any]:
    try:
        return "ok", h.bind(args)
    except InvalidArgs:
        return "invalid", None


@pytest.mark.parametrize("handler", HANDLERS, ids=lambda h: h.name)
@settings(max_examples=300, deadline=None)
@given(payload=payloads)
def test_fast_and_slow_binding_agree(handler: Handler, payload: Any) -> None:
    assert handler._shape is not None  # these signatures all take the fast path
    slow = dataclasses.replace(handler)
    object.__setattr__(slow, "_shape", None)
    fast_kind, fast = _outcome(handler, payload)
    slow_kind, reference = _outcome(slow, payload)
    assert fast_kind == slow_kind
    if fast_kind == "ok":
        # The fast path fills in defaults; the call is the same one.
        assert _call(handler, fast) == _call(handler, reference)


def _call(handler: Handler, bound: tuple[tuple[Any, ...], dict[str, Any]]) -> dict[str, Any]:
    sig = handler._signature
    result = sig.bind(*bound[0], **bound[1])
    result.apply_defaults()
    return dict(result.arguments)
