"""A position in the web's bulk filters is a whole number in range, or a 400 naming the field."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.exceptions import HTTPException

from rota.web.sets import MAX_POSITION, _position


@given(st.text(max_size=30) | st.from_regex(r"\A\s*[0-9]{1,14}\s*\Z"))
def test_a_position_is_a_whole_number_in_range_or_a_400_naming_the_field(text: str) -> None:
    digits = re.fullmatch(r"\s*([0-9]+)\s*", text)
    if text == "":
        assert _position(text, "from") is None
    elif digits and int(digits[1]) <= MAX_POSITION:
        assert _position(text, "from") == int(digits[1])
    else:
        with pytest.raises(HTTPException, match=r"\A400: from: [^\n]*\Z"):
            _position(text, "from")
