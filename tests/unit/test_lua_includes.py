"""The Lua files name the helpers they include, and the names are checked.

A script sent by ``EVAL`` carries only the helpers it includes (and theirs), so a
helper function it calls without including is a script that fails at its first call on
a Redis without functions. The check finds that, an unknown name, an unused include and
a cycle when the scripts are rendered, before any server sees them.
"""

from __future__ import annotations

from importlib.resources import files

import pytest

from rota.protocol.includes import IncludeError, plan, used
from rota.protocol.render import SCRIPT_NAMES, helpers, library, script_source


def _texts() -> dict[str, str]:
    lua = files("rota.protocol").joinpath("lua")
    return {
        p.name.removesuffix(".lua"): p.read_text(encoding="utf-8")
        for p in lua.iterdir()
        if p.name.endswith(".lua")
    }


def _with(name: str, text: str) -> dict[str, str]:
    return {**_texts(), name: text}


def test_each_script_carries_only_the_helpers_it_includes() -> None:
    needs = helpers().needs
    assert needs["wait"] == ("_base",)
    assert needs["pause"] == ("_wake",)
    assert needs["forget_names"] == ()
    assert needs["enqueue"] == (
        "_base", "_counts", "_debounce", "_wake", "_fair", "_graph", "_enqueue",
    )  # fmt: skip
    wait = script_source("wait")
    assert "local function is_hash(" in wait
    assert "local function wake(" not in wait
    assert "local function bury(" not in wait
    assert "set_prefix(KEYS[1])\n" in wait and "enter(KEYS[1])" not in wait
    assert "\nenter(KEYS[1])\n" in script_source("fetch")
    assert len(wait) < len(script_source("fetch")) / 4


def test_the_library_holds_every_helper_once_in_include_order() -> None:
    code = library().code
    texts = _texts()
    starts = [code.index(texts[h]) for h in helpers().order]
    assert starts == sorted(starts)
    assert helpers().order == (
        "_base",
        "_counts",
        "_debounce",
        "_wake",
        "_fair",
        "_graph",
        "_enqueue",
        "_expiry",
        "_fairwindow",
        "_fairfast",
        "_fairkey",
        "_fairfetch",
        "_runtimes",
    )
    assert code.count("local function bury(") == 1
    assert "\nenter(KEYS[1])\n" in code and "set_prefix(KEYS[1])\n" not in code


def test_a_script_that_calls_a_helper_it_did_not_include_fails_the_check() -> None:
    wait = _texts()["wait"]
    broken = wait + "wake(ARGV[1])\n"
    with pytest.raises(IncludeError, match=r"wait\.lua uses wake of _wake\.lua but does not"):
        plan(_with("wait", broken))
    # Including it mends it; a helper reached only through another include does not.
    plan(_with("wait", broken.replace("-- include: _base", "-- include: _base _wake")))
    delete = _texts()["delete"].replace(
        "-- include: _base _graph _fair", "-- include: _graph _fair"
    )
    with pytest.raises(
        IncludeError, match=r"delete\.lua uses incr, is_hash, release_holds, sane_id"
    ):
        plan(_with("delete", delete))


def test_a_helper_that_calls_one_it_did_not_include_fails_the_check() -> None:
    graph = _texts()["_graph"].replace("-- include: _base _counts _wake", "-- include: _base _wake")
    with pytest.raises(IncludeError, match=r"_graph\.lua uses count of _counts\.lua"):
        plan(_with("_graph", graph))


def test_an_unknown_name_an_unused_include_and_no_include_line_fail_the_check() -> None:
    wait = _texts()["wait"]
    with pytest.raises(IncludeError, match=r"wait\.lua includes _nope, which is no helper"):
        plan(_with("wait", wait.replace("-- include: _base", "-- include: _base _nope")))
    with pytest.raises(IncludeError, match=r"wait\.lua includes _graph but uses none of its"):
        plan(_with("wait", wait.replace("-- include: _base", "-- include: _base _graph")))
    with pytest.raises(IncludeError, match=r"wait\.lua: the first line is not '-- include:"):
        plan(_with("wait", wait.split("\n", 1)[1]))


def test_helpers_that_include_each_other_fail_the_check() -> None:
    texts = {
        "_a": "-- include: _b\nlocal function fa() return fb() end\n",
        "_b": "-- include: _a\nlocal function fb() return fa() end\n",
        "s": "-- include: _a\nreturn fa()\n",
    }
    with pytest.raises(IncludeError, match=r"the helpers include each other: _a -> _b -> _a"):
        plan(texts)


def test_two_helpers_that_define_one_name_fail_the_check() -> None:
    texts = {"_a": "-- include:\nlocal x = 1\n", "_b": "-- include:\nlocal x = 2\n"}
    with pytest.raises(IncludeError, match=r"_b\.lua and _a\.lua both define x"):
        plan(texts)


def test_names_in_comments_strings_fields_and_own_locals_are_no_use() -> None:
    text = (
        "-- include:\n"
        "-- wake(name) in a comment\n"
        "local s = 'wake(x)' .. \"bury(y)\" .. [[notify(z)]]\n"
        "local t = redis.wake(1) .. obj:bury(2)\n"
        "local function f(count) return count end\n"
        "for release in pairs(t) do end\n"
    )
    assert used(text) & {"wake", "bury", "notify", "count", "release"} == set()
    assert {"redis", "pairs"} <= used(text)


def test_every_script_renders() -> None:
    for name in SCRIPT_NAMES:
        assert script_source(name).endswith("\n")
        assert script_source(name, flagged=True).startswith("#!lua")
