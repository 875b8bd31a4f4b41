"""Encoding of args, results and snapshots (msgspec JSON; never pickle).

Args are encoded once, at enqueue, and stored as JSON text that no script re-encodes,
so what a producer wrote is what the handler receives, byte for byte.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import math
import uuid
from typing import Any, Final

import msgspec

__all__ = ["BadPayload", "decode_args", "encode_args", "encode_json", "parse_input"]


class BadPayload(ValueError):
    """Stored args that are not a JSON array or object."""


def _fallback(obj: Any) -> Any:
    return repr(obj)


_encoder = msgspec.json.Encoder()
_lenient = msgspec.json.Encoder(enc_hook=_fallback)
_decoder = msgspec.json.Decoder()


_PLAIN: Final = frozenset({str, int, bool, type(None)})
#: Values JSON carries as text that a typed handler parameter turns back into them
#: (``datetime`` from ISO 8601, ``UUID``, ``Decimal``, an ``Enum`` from its value);
#: an untyped parameter gets the text.
_AS_TEXT: Final = (
    datetime.date,
    datetime.time,
    datetime.timedelta,
    uuid.UUID,
    decimal.Decimal,
    enum.Enum,
)
_HOW: Final = {
    "bytes": "encode it as text first (base64, or .decode()) and decode it in the handler",
    "set": "pass a list (a typed parameter `set[...]` turns it back into a set)",
    "float": "JSON has no NaN or infinity: pass None or a string",
}


#: How deep args may nest: past it, decoders (rota's among them) refuse the JSON, so the
#: job could never run.
MAX_DEPTH: Final = 500


def _check(value: Any, where: str, text: bool = False, depth: int = 0) -> None:
    """Raise a TypeError naming ``where`` for a value JSON would change or drop, at any
    depth (inside a dataclass or a Struct too). ``text``: also look for strings UTF-8
    cannot carry (a lone surrogate), which the encoder finds first and cheaper; this
    walk then only says where."""
    kind = type(value)
    if kind is str:
        if text:
            try:
                value.encode()
            except UnicodeEncodeError as exc:
                raise TypeError(
                    f"{where}: {value[exc.start : exc.end]!r} at {exc.start} is a lone"
                    " surrogate, which UTF-8 (and so JSON) cannot carry"
                ) from None
        return
    if kind in _PLAIN:
        return
    if depth > MAX_DEPTH:
        raise TypeError(
            f"{where[:40]}…: nests more than {MAX_DEPTH} levels deep, which JSON readers refuse"
        )
    if kind is float:
        if not math.isfinite(value):
            raise TypeError(f"{where}: {value!r} cannot travel in JSON: {_HOW['float']}")
    elif kind is list or kind is tuple:
        for i, item in enumerate(value):
            _check(item, f"{where}[{i}]", text, depth + 1)
    elif kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise TypeError(
                    f"{where}: key {key!r} is not a string; JSON object keys are strings"
                )
            _check(key, f"{where} key", text)
            _check(item, f"{where}[{key!r}]", text, depth + 1)
    elif isinstance(value, bytes | bytearray | memoryview):
        raise TypeError(f"{where}: bytes cannot travel in JSON: {_HOW['bytes']}")
    elif isinstance(value, set | frozenset):
        raise TypeError(f"{where}: a set cannot travel in JSON: {_HOW['set']}")
    elif isinstance(value, _AS_TEXT):
        return
    elif isinstance(value, msgspec.Struct):
        # An object in JSON; a parameter typed with its class gets it back, if every
        # field travels faithfully.
        for field in value.__struct_fields__:
            _check(getattr(value, field), f"{where}.{field}", text, depth + 1)
    elif dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            _check(getattr(value, f.name), f"{where}.{f.name}", text, depth + 1)
    elif isinstance(value, float) and not math.isfinite(value):  # a float subclass
        raise TypeError(f"{where}: {value!r} cannot travel in JSON: {_HOW['float']}")
    elif not isinstance(value, int | float | str):
        raise TypeError(
            f"{where}: a value of type {kind.__name__} cannot travel in JSON: pass plain data"
            " (str, int, float, bool, None, lists, dicts) or a msgspec Struct / dataclass"
        )


def encode_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
    """Positional args become a JSON array, keyword args a JSON object (not both).

    A value JSON would change or drop (bytes, a set, NaN or an infinity, an object it
    has no form for, a dict with keys that are not strings) is a ``TypeError`` naming
    the argument: a job must get what its producer gave.
    """
    if args and kwargs:
        raise TypeError("pass positional or keyword args to a job, not both")
    for i, arg in enumerate(args):
        _check(arg, f"argument {i}")
    for key, arg in kwargs.items():
        _check(arg, f"argument {key!r}")
    try:
        return _encoder.encode(list(args) if args else kwargs)
    except UnicodeEncodeError:  # the rare path: walk again, and say where the string is
        for i, arg in enumerate(args):
            _check(arg, f"argument {i}", text=True)
        for key, arg in kwargs.items():
            _check(arg, f"argument {key!r}", text=True)
        raise


def decode_args(raw: bytes) -> list[Any] | dict[str, Any]:
    """Decode stored args; anything but a JSON array or object is a :class:`BadPayload`."""
    try:
        value = _decoder.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise BadPayload(f"args are not valid JSON: {exc}") from None
    if isinstance(value, dict | list):
        return value
    raise BadPayload(f"args must be a JSON array or object, not {type(value).__name__}")


def encode_json(value: Any) -> bytes:
    """Encode a result or snapshot; objects JSON cannot hold are stored as their repr."""
    return _lenient.encode(value)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"the key {key!r} is given twice")
        out[key] = value
    return out


def parse_input(text: str | bytes) -> Any:
    """JSON a person or another program typed (``rota enqueue --args``, an HTTP body):
    a ValueError that says why when it is not JSON, or when an object names a key
    twice (a JSON parser keeps the last one and drops the other without a word)."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except RecursionError:
        raise ValueError("it nests arrays or objects too deep") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"it is not valid UTF-8: {exc.reason} at byte {exc.start}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"it is not JSON: {exc.msg} at character {exc.pos}") from None
