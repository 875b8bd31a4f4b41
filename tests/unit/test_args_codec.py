"""The job-arguments codec refuses what is not a job's arguments, without a server."""

from __future__ import annotations

from rota.protocol import codec


def test_codec_rejects_what_is_not_args() -> None:
    import pytest

    for bad in (b"not json{", b"42", b'"text"', b"\xff\xfe", b""):
        with pytest.raises(
            codec.BadPayload,
            match=r"^args (are not valid JSON|must be a JSON array or object, not )",
        ):
            codec.decode_args(bad)
    with pytest.raises(TypeError, match="not both"):
        codec.encode_args((1,), {"a": 1})
