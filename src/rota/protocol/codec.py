"""Encoding of args, results and snapshots (msgspec JSON; never pickle).

Args are encoded once, at enqueue, and stored as JSON text that no script re-encodes,
so what a producer wrote is what the handler receives, byte for byte.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["BadPayload", "decode_args", "encode_args", "encode_json"]


class BadPayload(ValueError):
    """Stored args that are not a JSON array or object."""


def _fallback(obj: Any) -> Any:
    return repr(obj)


_encoder = msgspec.json.Encoder()
_lenient = msgspec.json.Encoder(enc_hook=_fallback)
_decoder = msgspec.json.Decoder()


def encode_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
    """Positional args become a JSON array, keyword args a JSON object (not both)."""
    if args and kwargs:
        raise TypeError("pass positional or keyword args to a job, not both")
    return _encoder.encode(list(args) if args else kwargs)


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
