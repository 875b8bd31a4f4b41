"""The only place where rota spells its Redis key names: this package.

Every key of a namespace starts with ``{namespace}:``. The braces are a Redis Cluster
hash tag, so the whole namespace hashes to one slot and every Lua script that touches
several keys stays atomic and cluster-safe. A namespace over K shards has K such tags,
``{namespace}`` and ``{namespace~i}`` or ``{namespace~i.n}`` (see
:mod:`rota.protocol.shards`), each a whole copy of the layout.

The names are spelled twice here and nowhere else: as tables of suffixes, with the Lua
prelude rendered from them (:mod:`rota.protocol.keys.names`), and as the methods of
:class:`Keys` that Python calls (:mod:`rota.protocol.keys.layout`), which
tests/test_keys.py holds to the same names. The Lua scripts receive the prefix
as ``KEYS[1]``, hand it to ``set_prefix`` and call ``key_queue(name)``,
``key_job(id)``, ``K_DEAD`` and so on.
"""

from __future__ import annotations

from rota.protocol.keys.layout import Keys, key_rest, prefix_of, renamed, tag_of
from rota.protocol.keys.names import (
    FAIR_MARK,
    LUA_KEYS,
    fixed_key,
    lua_prelude,
    validate_namespace,
)

__all__ = [
    "FAIR_MARK",
    "LUA_KEYS",
    "Keys",
    "fixed_key",
    "key_rest",
    "lua_prelude",
    "prefix_of",
    "renamed",
    "tag_of",
    "validate_namespace",
]
