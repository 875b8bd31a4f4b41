"""The layering rule and the map in docs/architecture.md stay true.

The folders are the layers: a module's layer is the folder it sits in under ``rota/``
(a module at the root, ``config.py``, is its own). ``FLOORS`` orders them, bottom to
top; a module imports only from its own floor and the floors below, and no two folders
import each other, directly or through others. The web UI and the CLI never import the
worker; modules below the front ends import nothing from the package root. Imports under
``if TYPE_CHECKING:`` count between folders too (a type named from above is an arrow
back up), not between one module and another. Every file and every name of the code the
architecture page names must exist. ``python tests/test_architecture.py`` prints the
imports between folders.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

import rota
import rota.testing

ROOT = Path(__file__).parents[2]
SRC = ROOT / "src"
PAGE = ROOT / "docs" / "architecture.md"

#: The floors, bottom to top: the folders (and root modules) on each. A folder may
#: import from its floor and the floors below, never from above.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("protocol", "wire", "errors", "urls", "config", "logging", "tracing", "acl", "version"),
    ("redis",),
    ("client", "inspect"),
    ("worker",),
    ("daemon", "testing"),
    ("cli", "web", "examples", "__main__"),
)

SOURCES = sorted(SRC.rglob("*.py"))


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = frozenset(map(_module, SOURCES))
PACKAGES = frozenset(_module(p) for p in SOURCES if p.name == "__init__.py")


def _folder(module: str) -> str:
    """The folder of ``module`` under ``rota/`` (a root module's own name): its layer."""
    return module.split(".")[1] if "." in module else ""


def _floor(folder: str) -> int | None:
    return next((i for i, floor in enumerate(FLOORS) if folder in floor), None)


def _layer(module: str) -> int | None:
    return _floor(_folder(module))


def _type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name | ast.Attribute) and "TYPE_CHECKING" in ast.unparse(
        node.test
    )


def _imports(tree: ast.Module) -> list[tuple[str, list[str], int]]:
    """``(imported module, names, line)`` of every runtime import of rota."""
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and _type_checking(node)
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    out: list[tuple[str, list[str], int]] = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names if a.name.startswith("rota")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "rota":
            for a in node.names:  # ``from rota import client`` imports a module
                sub = f"rota.{a.name}"
                if sub in MODULES:
                    out.append((sub, [], node.lineno))
                else:
                    out.append(("rota", [a.name], node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _within(node.module, "rota"):
            out.append((str(node.module), [a.name for a in node.names], node.lineno))
    return sorted(out, key=lambda x: x[2])


def _within(module: str | None, *packages: str) -> bool:
    return module is not None and any(module == p or module.startswith(p + ".") for p in packages)


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in map(_module, SOURCES) if m != "rota" and _layer(m) is None]
    assert unplaced == [], "put their folders on a floor of FLOORS and in docs/architecture.md"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: _module(p))
def test_imports_go_down_only(path: Path) -> None:
    module = _module(path)
    if module == "rota":
        return
    own = _layer(module)
    assert own is not None
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for target, names, line in _imports(tree):
        where = f"{path.relative_to(ROOT)}:{line} imports {target}"
        if target == "rota":
            allowed: set[str] | None = set() if own < len(FLOORS) - 1 else None
            assert allowed is None or set(names) <= allowed, f"{where} {names}: root is public API"
            continue
        theirs = _layer(target)
        assert theirs is not None, f"{where}: a module with no layer"
        assert theirs <= own, f"{where}: {_folder(target)} is on a floor above {_folder(module)}"
        if _within(module, "rota.cli", "rota.web"):
            assert not _within(target, "rota.worker"), f"{where}: front ends never import it"
        if _within(module, "rota.web"):
            assert not _within(target, "rota.cli"), f"{where}: the web UI is not the CLI"


def test_a_module_importing_upward_is_caught() -> None:
    tree = ast.parse("from rota.worker.pool import WorkerPool\nimport rota.client\n")
    found = _imports(tree)
    assert [t for t, _, _ in found] == ["rota.worker.pool", "rota.client"]
    assert _imports(ast.parse("from rota import client, __version__"))[0][0] == "rota.client"
    typed = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import rota.cli\n")
    assert _imports(typed) == []


def _redis_py_imports(source: str) -> list[int]:
    """The lines of ``source`` that import redis-py, type-checking imports included."""
    return [
        n.lineno
        for n in ast.walk(ast.parse(source))
        if (isinstance(n, ast.Import) and any(_within(a.name, "redis") for a in n.names))
        or (isinstance(n, ast.ImportFrom) and n.level == 0 and _within(n.module, "redis"))
    ]


def test_only_wire_and_redis_import_redis_py() -> None:
    """Only the two folders that talk to Redis (rota.wire, rota.redis) import redis-py;
    elsewhere the client's type and the errors come from rota.wire.redispy, so that no
    other module catches redis-py's exceptions by their own names."""
    found = {
        _module(p): lines
        for p in SOURCES
        if not _within(_module(p), "rota.redis", "rota.wire")
        if (lines := _redis_py_imports(p.read_text(encoding="utf-8")))
    }
    assert found == {}
    assert _redis_py_imports("import redis.exceptions\nfrom redis.asyncio import Redis\n") == [1, 2]
    assert _redis_py_imports("from rota.wire.redispy import Redis\nimport redistools\n") == []


def test_every_file_the_architecture_page_names_exists() -> None:
    text = PAGE.read_text(encoding="utf-8")
    named = set(re.findall(r"`(src/rota/[\w/.]+)`", text))
    assert len(named) >= 25
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert missing == [], f"docs/architecture.md names files that do not exist: {missing}"
    unmentioned = sorted(
        m
        for m in MODULES - PACKAGES - {"rota.__main__"}
        if m.count(".") == 1 and f"src/{m.replace('.', '/')}.py" not in text
    )
    assert unmentioned == [], f"docs/architecture.md does not place {unmentioned}"


_GENERIC = {"Any", "None", "Self", "Sequence", "Iterable", "Iterator", "AsyncIterator"}
_GENERIC |= {"Awaitable", "Callable", "Mapping", "Literal", "Redis", "Exception"}


def test_every_type_a_public_method_returns_is_exported() -> None:
    """What a caller gets back, it can name: ``rota.X`` (or, for what only a test
    looks at, ``rota.testing.X``) for every class in a return annotation of the public
    classes' methods."""
    public = {*rota.__all__, *rota.testing.__all__}
    missing = set()
    for cls in (rota.Client, rota.WorkerPool, rota.JobContext):
        for name, member in inspect.getmembers(cls, callable):
            if name.startswith("_"):
                continue
            returned = str(inspect.signature(member).return_annotation)
            for type_name in re.findall(r"\b[A-Z][A-Za-z]+\b", returned):
                if type_name not in public and type_name not in _GENERIC:
                    missing.add(f"{cls.__name__}.{name} -> {type_name}")
    assert not missing, sorted(missing)


def _all_imports(path: Path) -> set[str]:
    """The rota modules ``path`` imports, those for type checking only included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in MODULES}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.add(sub if sub in MODULES else node.module)
    return {m for m in found if m in MODULES and m != "rota"}


def _circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The circles of ``graph`` (who imports whom), each as the path that closes it."""
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                circles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return circles


def test_no_module_imports_one_that_imports_it_back() -> None:
    """No circle of imports, type-checking ones included, inside a layer or across."""
    graph = {_module(p): _all_imports(p) - {_module(p)} for p in SOURCES if _module(p) != "rota"}
    circles = _circles(graph)
    assert circles == [], "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)


#: The attributes of a client and of its shards that hold Redis: its redis-py client, keys,
#: connections, script calls and shards. Above the client layer, named reads instead.
HANDLES = frozenset({"redis", "keys", "conn", "scope", "parts", "alone", "part_holding"})
#: The modules above the client layer, and its read models.
ABOVE = ("rota.inspect", "rota.web", "rota.cli", "rota.daemon", "rota.testing")


def _reaches_redis(source: str) -> list[int]:
    """The lines of ``source`` that read one of :data:`HANDLES` of any expression
    (``client.redis.hgetall``, ``part.keys``, ``client.parts``...)."""
    return [
        n.lineno
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.Attribute) and n.attr in HANDLES
    ]


def test_only_the_client_layer_touches_the_clients_redis() -> None:
    """The web, the CLI, the read models of rota.inspect, the daemon and the test helpers
    call the client's methods and the named reads of rota.client.admin_reads (and
    rota.client.admin_servers); a new read of Redis goes there, where every one of them can
    use it, and the shards' layout can change under it."""
    found = {
        _module(p): lines
        for p in SOURCES
        if _within(_module(p), *ABOVE)
        if (lines := _reaches_redis(p.read_text(encoding="utf-8")))
    }
    assert found == {}
    assert _reaches_redis("async def f(client):\n    await client.redis.get('k')\n") == [2]
    assert _reaches_redis("n = len(client.parts)\nk = shard.keys.job('a')\n") == [1, 2]
    assert _reaches_redis("figures = reading.server\nredis = client.names()\n") == []


def folder_graph() -> dict[str, set[str]]:
    """The folders each folder imports from, type-checking imports included."""
    graph: dict[str, set[str]] = {}
    for path in SOURCES:
        if (module := _module(path)) != "rota":
            mine = _folder(module)
            graph.setdefault(mine, set()).update(_folder(t) for t in _all_imports(path))
            graph[mine].discard(mine)
    return graph


def _upward(graph: Mapping[str, set[str]]) -> list[str]:
    """The arrows of ``graph`` that run up a floor, or from or to a folder on none."""
    floor = {f: _floor(f) for f in {*graph, *(t for ts in graph.values() for t in ts)}}
    return [
        f"{folder} -> {target}"
        for folder, targets in sorted(graph.items())
        for target in sorted(targets)
        if (mine := floor[folder]) is None or (theirs := floor[target]) is None or theirs > mine
    ]


def test_the_folders_are_the_layers() -> None:
    """Every folder stands on a floor, imports nothing from a floor above (type-checking
    imports included), and no two folders import each other, directly or through others."""
    graph = folder_graph()
    named = {f for floor in FLOORS for f in floor}
    assert sorted(named - set(graph)) == [], "FLOORS names folders that do not exist"
    assert _upward(graph) == []
    circles = _circles(graph)
    assert circles == [], "folder circles:\n" + "\n".join(" -> ".join(c) for c in circles)
    sample = {"protocol": {"wire", "redis"}, "worker": {"client"}, "wired": {"protocol"}}
    assert _upward(sample) == ["protocol -> redis", "wired -> protocol"]
    assert _circles({"cli": {"web"}, "web": {"examples"}, "examples": {"cli"}}) == [
        ["cli", "web", "examples", "cli"]
    ]


# -- the code the architecture page names -------------------------------------------------

_TICKED = re.compile(r"`([^`\n]+)`")
_NAME = re.compile(r"@?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_FILE = re.compile(r"src/rota/[\w/]*\w\.py")
_FOLDER = re.compile(r"src/rota/[\w/]*\w/")


def _units(text: str) -> list[str]:
    """The page cut into paragraphs, table rows and list items."""
    units: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        units += re.split(r"\n(?=\|)|\n(?=\s*(?:\d+\.|-) )", block)
    return units


def _modules_named(unit: str) -> list[str]:
    """The modules a unit names: its files, its folders with all their modules, its
    ``rota.x`` names that are modules; then the package root."""
    ticked = _TICKED.findall(unit)
    named = [_module(ROOT / p) for p in ticked if _FILE.fullmatch(p)]
    for folder in (p for p in ticked if _FOLDER.fullmatch(p)):
        named += sorted(_module(p) for p in (ROOT / folder).rglob("*.py"))
    named += [p for p in ticked if p in MODULES]
    return [*named, "rota"]


def _declared(cls: type, name: str) -> bool:
    """Whether instances of ``cls`` have ``name``: annotated in one of its classes'
    bodies, or assigned as ``self.name`` in their code."""
    for c in cls.__mro__:
        if not c.__module__.startswith("rota"):
            continue
        if name in vars(c).get("__annotations__", {}):
            return True
        if re.search(rf"\bself\.{name}\s*(?::|=(?!=))", inspect.getsource(c)):
            return True
    return False


def _resolves(start: object, path: list[str]) -> bool:
    """Whether ``start.a.b...`` exists; an instance's attribute ends the name."""
    obj = start
    for i, part in enumerate(path):
        if not hasattr(obj, part):
            return i == len(path) - 1 and isinstance(obj, type) and _declared(obj, part)
        obj = getattr(obj, part)
    return True


def _symbol_missing(name: str, modules: list[str]) -> bool:
    parts = name.removeprefix("@").split(".")
    if parts[0] == "rota":
        for cut in range(len(parts), 0, -1):
            if ".".join(parts[:cut]) in MODULES:
                module = importlib.import_module(".".join(parts[:cut]))
                return not _resolves(module, parts[cut:])
        return True
    if parts[0][0].islower() and len(parts) > 1:  # ``client.options``: a Client's conn
        parts[0] = parts[0][0].upper() + parts[0][1:]
    found = (_resolves(importlib.import_module(m), parts) for m in modules)
    return not any(found)


def _checked(name: str) -> bool:
    """Whether a ticked text is a code symbol the page vouches for (see below)."""
    if not _NAME.fullmatch(name) or name.endswith(".py"):
        return False
    if name.startswith("@") or "." in name:
        return True
    return name[0].isupper() and (name != name.upper() or "_" in name)


def _missing_symbols(text: str) -> list[str]:
    missing: list[str] = []
    for unit in _units(text):
        modules = _modules_named(unit)
        folders = {ROOT / p for p in _TICKED.findall(unit) if _FOLDER.fullmatch(p)}
        folders |= {(ROOT / p).parent for p in _TICKED.findall(unit) if _FILE.fullmatch(p)}
        for name in _TICKED.findall(unit):
            if re.fullmatch(r"\w+\.py", name):
                if not any((folder / name).exists() for folder in folders):
                    missing.append(name)
            elif _checked(name) and _symbol_missing(name, modules):
                missing.append(name)
    return missing


def test_every_symbol_the_architecture_page_names_exists() -> None:
    """A name in backticks that reads as code is checked, with no server: imported
    and looked up attribute by attribute.

    - ``rota.x.y``: the longest part that is a module is imported, the rest looked up in it.
    - A name starting with a capital (``Sharded``, ``Client.enqueue``,
      ``Settings.__post_init__``) and a decorator (``@documented``) are looked up in the
      modules named in the same paragraph, table row or list item (``src/rota/x.py``; a
      folder ``src/rota/x/``: each of its modules), then in the package root ``rota``.
    - ``client.options``: a lowercase first part is an instance of the class of that name
      capitalised (``Client``); its last part may be an attribute the class's code
      annotates or assigns (``self.options = ...``).
    - A bare file name (``figures.py``) is a file in a folder that paragraph names, or
      beside a file it names.
    - Not checked: bare lowercase words (``enqueue``, ``timeout``: a script, a job's
      option, a command as often as a function), capitals only (``EVALSHA``: a Redis
      command), keys, commands and options (``{ns}:waiting``, ``rota worker``).
    """
    assert _missing_symbols(PAGE.read_text(encoding="utf-8")) == []
    sample = (
        "`PoolRuntime.run_attempt` (`src/rota/worker/runtime.py`), `PoolRuntime.cancel`,"
        " `client.options`, `client.nothing`, `rota.inspect.shard_views`, `rota.inspect.nope`,"
        " `Sharded`, `Unheard`, `EVALSHA`, `timeout`, `runtime.py`, `runtimes.py`\n\n"
        "| 5 | `src/rota/web/` | `@documented`, `Shard` (`src/rota/client/shard.py`) |\n"
        "| 6 | `src/rota/cli/` | `@documented`, `figures.py` |\n"
        "- `PoolRuntime` alone\n"
    )
    assert _missing_symbols(sample) == [
        "PoolRuntime.run_attempt",
        "client.nothing",
        "rota.inspect.nope",
        "Sharded",  # not in runtime.py, nor in the root: sharding.py is another paragraph's
        "Unheard",
        "runtimes.py",
        "@documented",
        "figures.py",
        "PoolRuntime",
    ]


if __name__ == "__main__":  # the imports between folders, bottom floor first
    for name, targets in sorted(folder_graph().items(), key=lambda f: (_floor(f[0]), f[0])):
        below = sorted(targets, key=lambda t: (_floor(t), t))
        print(f"{_floor(name)} {name:9} -> {', '.join(below)}")  # noqa: T201
