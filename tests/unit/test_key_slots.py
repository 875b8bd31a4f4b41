"""Every key of a namespace hashes to the namespace's slot, and the scripts build keys only
from the prefix."""

from __future__ import annotations

import inspect
import re
from importlib.resources import files

import pytest
from redis.crc import key_slot

from rota.protocol.keys import LUA_KEYS, Keys, lua_prelude
from rota.protocol.render import SCRIPT_NAMES, script_source

SAMPLES = ("x", "a:b:c", "{other}", "}{", "", "名前", "job:{x}:y")


LUA_DIR = files("rota.protocol").joinpath("lua")


def _slot(namespace: str) -> int:
    return key_slot(("{" + namespace + "}:").encode())


@pytest.mark.parametrize("namespace", ["rota", "t1", "a-b.c_d", "x" * 64])
def test_every_key_method_hashes_to_the_namespace_slot(namespace: str) -> None:
    keys = Keys(namespace)
    slot = _slot(namespace)
    covered = set()
    for name, member in inspect.getmembers(Keys):
        if name.startswith("_") or name in ("namespace", "prefix"):
            continue
        if isinstance(member, property):
            built = [getattr(keys, name)]
        elif inspect.isfunction(member):
            pair = len(inspect.signature(member).parameters) == 3  # (self, name, fair key)
            method = getattr(keys, name)
            built = [method(s, s) if pair else method(s) for s in SAMPLES]
        else:
            continue
        covered.add(name)
        for key in built:
            assert key.startswith(keys.prefix), (name, key)
            assert key_slot(key.encode()) == slot, (name, key)
    assert set(LUA_KEYS) <= covered, set(LUA_KEYS) - covered


def _lua_sources() -> dict[str, str]:
    return {
        p.name: p.read_text(encoding="utf-8") for p in LUA_DIR.iterdir() if p.name.endswith(".lua")
    }


def _code(text: str) -> str:
    """Lua without comments and string contents (kept as empty quotes)."""
    text = re.sub(r"--[^\n]*", "", text)
    return re.sub(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", "''", text)


def test_scripts_build_keys_only_from_the_prefix() -> None:
    prelude = lua_prelude()
    defined_fn = set(re.findall(r"local function (key_\w+)", prelude))
    defined_k = set(re.findall(r"\b(K_[A-Z_]+)\s*=", prelude))
    assert len(defined_fn) + len(defined_k) == len(LUA_KEYS)
    for name, text in _lua_sources().items():
        code = _code(text)
        # The prefix is the only key a script is handed; nothing reads KEYS[2...].
        assert re.findall(r"KEYS\[(\d+)\]", code) in ([], ["1"]), name
        # No key is spelled in Lua: no hash tag in a literal, no concatenation on P.
        for literal in re.findall(r"'((?:[^'\\]|\\.)*)'", re.sub(r"--[^\n]*", "", text)):
            assert "{" not in literal and "}:" not in literal, (name, literal)
        assert not re.search(r"\bP\s*\.\.", code), name
        for used in re.findall(r"\b(key_\w+)\s*\(", code):
            assert used in defined_fn, (name, used)
        for used in re.findall(r"\b(K_[A-Z_]+)\b", code):
            assert used in defined_k, (name, used)
    for name in SCRIPT_NAMES:  # every rendered script starts by handing KEYS[1] over
        assert "KEYS[1]" in script_source(name), name
