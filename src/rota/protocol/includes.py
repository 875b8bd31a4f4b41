"""Which shared Lua helpers each file of ``protocol/lua`` includes, as a checked graph.

Every file starts with one line naming the helpers it uses, ``-- include: _base _wake``
(a helper that uses none: ``-- include:``). A script sent by ``EVAL`` carries only the
helpers it includes and theirs, in an order where each comes after those it includes,
instead of all of them: ``wait.lua`` calls one helper, not the 766 lines of five files.

The lines are checked, not trusted: a name that is no helper, a cycle, a helper whose
function a file calls without including it, or an include a file uses nothing of, is an
:class:`IncludeError` when the scripts are rendered. The check is static: the names a
file uses (outside comments and strings, not a field after ``.`` or ``:``) against the
top-level names each helper defines, less the names the file declares itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = ["IncludeError", "Plan", "defined", "included", "plan", "used"]

_HEADER: Final = re.compile(r"-- include:([ \w]*)\n")

# Comments (long ones first), long strings and quoted strings: text that names nothing.
_INERT: Final = re.compile(
    r"--\[(=*)\[.*?\]\1\]|--[^\n]*|\[(=*)\[.*?\]\2\]"
    r"|'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\"",
    re.S,
)
_NAME: Final = re.compile(r"(?<![.:\w])[A-Za-z_]\w*")
_TOP: Final = re.compile(
    r"^local function (\w+)|^local ([\w, ]+?)\s*(?:=|$)|^(\w+) = function", re.M
)
_DECLARED: Final = re.compile(
    r"\blocal (?!function\b)([\w, ]+)|\bfunction\s*([\w.:]*)\s*\(([^)]*)\)"
    r"|\bfor ([\w, ]+?) (?:in|=)"
)


class IncludeError(ValueError):
    """The include lines of the Lua files do not hold: what is wrong, and where."""


@dataclass(frozen=True)
class Plan:
    """``order``: every helper, each after those it includes (the library's order);
    ``needs``: per file, the helpers it needs directly or through others, in that order."""

    order: tuple[str, ...]
    needs: Mapping[str, tuple[str, ...]]


def _code(text: str) -> str:
    return _INERT.sub(" ", text)


def _names(groups: tuple[str | None, ...]) -> set[str]:
    return {n.strip() for g in groups if g for n in g.split(",") if n.strip()}


def defined(text: str) -> set[str]:
    """The names a helper defines for others: its top-level locals and functions."""
    return {n for m in _TOP.finditer(_code(text)) for n in _names(m.groups())}


def used(text: str) -> set[str]:
    """The free names a file uses: every name, less those it declares (locals,
    parameters, loop variables), so that a local ``count`` is not the helper's."""
    code = _code(text)
    own = {n for m in _DECLARED.finditer(code) for n in _names(m.groups())}
    return set(_NAME.findall(code)) - own


def included(name: str, text: str) -> tuple[str, ...]:
    """The helpers the first line of the file ``name`` includes."""
    header = _HEADER.match(text)
    if header is None:
        raise IncludeError(f"{name}.lua: the first line is not '-- include: <helpers>'")
    return tuple(header[1].split())


def plan(texts: Mapping[str, str]) -> Plan:
    """The :class:`Plan` of the files ``texts`` (name without ``.lua`` -> text; helpers'
    names start with ``_``). Raises :class:`IncludeError`."""
    direct = {name: included(name, text) for name, text in texts.items()}
    helpers = sorted(n for n in texts if n.startswith("_"))
    owner: dict[str, str] = {}
    for helper in helpers:
        for symbol in defined(texts[helper]):
            if symbol in owner:
                raise IncludeError(f"{helper}.lua and {owner[symbol]}.lua both define {symbol}")
            owner[symbol] = helper
    for name, text in texts.items():
        _check(name, direct[name], text, owner, helpers)
    order: list[str] = []  # every helper after those it includes
    for helper in helpers:
        _visit(helper, direct, order, ())
    needs: dict[str, tuple[str, ...]] = {}
    for name in texts:
        closure: set[str] = set()
        todo = list(direct[name])
        while todo:
            helper = todo.pop()
            if helper not in closure:
                closure.add(helper)
                todo.extend(direct[helper])
        needs[name] = tuple(h for h in order if h in closure)
    return Plan(order=tuple(order), needs=needs)


def _check(
    name: str, includes: tuple[str, ...], text: str, owner: Mapping[str, str], helpers: list[str]
) -> None:
    for helper in includes:
        if helper not in helpers:
            raise IncludeError(f"{name}.lua includes {helper}, which is no helper")
    uses: dict[str, set[str]] = {}
    for symbol in used(text):
        if owner.get(symbol, name) != name:
            uses.setdefault(owner[symbol], set()).add(symbol)
    for helper, symbols in sorted(uses.items()):
        if helper not in includes:
            names = ", ".join(sorted(symbols))
            raise IncludeError(f"{name}.lua uses {names} of {helper}.lua but does not include it")
    for helper in includes:
        if helper not in uses:
            raise IncludeError(f"{name}.lua includes {helper} but uses none of its names")


def _visit(
    helper: str, direct: Mapping[str, tuple[str, ...]], order: list[str], path: tuple[str, ...]
) -> None:
    if helper in order:
        return
    if helper in path:
        cycle = " -> ".join((*path[path.index(helper) :], helper))
        raise IncludeError(f"the helpers include each other: {cycle}")
    for dependency in direct[helper]:
        _visit(dependency, direct, order, (*path, helper))
    order.append(helper)
