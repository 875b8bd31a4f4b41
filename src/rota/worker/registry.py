"""Registered handlers and the checks their args must pass before a call."""

from __future__ import annotations

import inspect
import random
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from rota.errors import InvalidArgs
from rota.protocol.bounds import HANDLER, MAX_DELAY, check
from rota.protocol.rate import Rate, parse_rate
from rota.worker.cron import Cron

__all__ = ["Backoff", "Handler", "Middleware", "Periodic", "default_backoff"]

Backoff = Callable[[int], float]
#: ``async def mw(ctx, call_next)``: ``await call_next()`` runs the rest of the chain.
Middleware = Callable[[Any, Callable[[], Awaitable[Any]]], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Periodic:
    """A job enqueued on a cron schedule, with fixed args."""

    name: str
    cron: Cron
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


def default_backoff(failures: int) -> float:
    """Seconds before retry number ``failures``: grows as its fourth power, with jitter
    so that jobs that failed together do not all come back at the same moment; at most
    the longest delay (ten years, ``rota.protocol.bounds.MAX_DELAY``), which a
    ``max_fails`` in the hundreds reaches."""
    return min(failures**4 + 15 + random.uniform(0, 30) * failures, MAX_DELAY)


_SIMPLE_DEFAULTS = (type(None), bool, int, float, str, bytes)


def _shape(
    name: str, sig: inspect.Signature, types: Mapping[str, Any]
) -> tuple[type[msgspec.Struct], type[msgspec.Struct] | None] | None:
    """msgspec Structs mirroring a handler's parameters: one taking an object, and one
    taking an array when every parameter may be passed by position. None when the
    signature has ``*args``, ``**kwargs``, positional-only parameters or defaults that
    a Struct cannot hold as they are (mutable ones)."""
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    by_position = True
    for p in sig.parameters.values():
        if p.kind is inspect.Parameter.KEYWORD_ONLY:
            by_position = False
        elif p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            return None
        hint = types.get(p.name, Any)
        if p.default is inspect.Parameter.empty:
            fields.append((p.name, hint))
        elif isinstance(p.default, _SIMPLE_DEFAULTS):
            fields.append((p.name, hint, p.default))
        else:
            return None
    try:
        objects = msgspec.defstruct(f"{name}_args", fields, forbid_unknown_fields=True)
        arrays = msgspec.defstruct(f"{name}_array", fields, array_like=True)
    except (TypeError, ValueError):  # e.g. a required parameter after a defaulted one
        return None
    return objects, arrays if by_position else None


def _isolated_target(name: str, func: Callable[..., Any]) -> str:
    """The path a child process imports an isolated handler by: a ValueError, one line
    naming the job, for a coroutine function or one no child can import."""
    if inspect.iscoroutinefunction(func):
        raise ValueError(f"job {name!r}: isolated: the handler must be a plain def, not async")
    module = getattr(func, "__module__", None)
    qualname = getattr(func, "__qualname__", None)
    if not module or not qualname or "<" in qualname or module == "__main__":
        where = f"{module}:{qualname}" if module and qualname else repr(func)
        raise ValueError(
            f"job {name!r}: isolated: the handler must be a module-level function a child"
            f" process can import by module:qualname, got {where}"
        )
    return f"{module}:{qualname}"


#: The options that are never None.
_REQUIRED: Final = frozenset({"priority", "max_fails"})


@dataclass(frozen=True, slots=True)
class Handler:
    """A job name's handler and its options, each checked within its range
    (``rota.protocol.bounds.HANDLER``): a ValueError naming the option and the job."""

    name: str
    func: Callable[..., Any]
    priority: int = 1
    max_fails: int = 4
    skip_dead: bool = False
    timeout: float | None = None
    max_concurrency: int | None = None
    rate: Rate | str | None = None  # a Rate once registered ("100/s" is parsed)
    backoff: Backoff = default_backoff
    keep_result: float | None = None
    middleware: tuple[Middleware, ...] = ()
    #: Seconds an attempt may go without ``ctx.checkin`` or ``ctx.progress`` before it
    #: is cancelled as ``idle`` (None: never).
    idle_timeout: float | None = None
    #: Seconds from its enqueue after which a job that gives no expiry of its own never
    #: starts (reason expired); applied by the fetch script (see ``Fetcher``).
    expires_in: float | None = None
    #: Run in a child process of the pool's (rota.worker.isolation) instead of a thread:
    #: a plain ``def`` at module level, which the child imports by :attr:`target`.
    isolated: bool = False
    #: ``module:qualname``, what a child imports an isolated handler by ("" otherwise).
    target: str = field(init=False, default="")
    is_async: bool = field(init=False)
    wants_ctx: bool = field(init=False)
    _signature: inspect.Signature = field(init=False, repr=False)
    _types: dict[str, Any] = field(init=False, repr=False)
    _plain: tuple[frozenset[str], frozenset[str]] | None = field(init=False, repr=False)
    _shape: tuple[type[msgspec.Struct], type[msgspec.Struct] | None] | None = field(
        init=False, repr=False
    )

    def __post_init__(self) -> None:
        self._check_options()
        set_ = object.__setattr__
        if self.rate is not None:
            try:
                set_(self, "rate", parse_rate(self.rate))
            except ValueError as exc:
                raise ValueError(f"job {self.name!r}: {exc}") from None
        func = self.func
        set_(self, "is_async", inspect.iscoroutinefunction(func))
        if self.isolated:
            set_(self, "target", _isolated_target(self.name, func))
        sig = inspect.signature(func)
        params = list(sig.parameters.values())
        wants_ctx = bool(params) and params[0].name in ("ctx", "context")
        set_(self, "wants_ctx", wants_ctx)
        if wants_ctx:
            sig = sig.replace(parameters=params[1:])
        set_(self, "_signature", sig)
        try:
            hints = typing.get_type_hints(func)
        except Exception:
            hints = {}
        types = {n: hints[n] for n in sig.parameters if n in hints and hints[n] is not Any}
        set_(self, "_types", types)
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        ps = sig.parameters.values()
        plain = not types and all(p.kind in kinds for p in ps)
        required = frozenset(p.name for p in ps if p.default is inspect.Parameter.empty)
        set_(self, "_plain", (frozenset(sig.parameters), required) if plain else None)
        set_(self, "_shape", _shape(self.name, sig, types))

    def _check_options(self) -> None:
        """Each option within its range (rota.protocol.bounds.HANDLER), checked at
        registration: a NaN timeout or keep_result registered would end every job of
        the handler dead, and a negative timeout would be ignored."""
        for option, bound in HANDLER.items():
            value = getattr(self, option)
            if value is None and option not in _REQUIRED:
                continue
            wrong = check(option, value, bound)
            if wrong is not None:
                raise ValueError(f"job {self.name!r}: {wrong}")
        if not isinstance(self.isolated, bool):
            raise TypeError(f"job {self.name!r}: isolated: must be True or False")
        if not isinstance(self.skip_dead, bool):
            raise TypeError(f"job {self.name!r}: skip_dead: must be True or False")
        if not callable(self.backoff):
            raise TypeError(f"job {self.name!r}: backoff: must be a function, got {self.backoff!r}")
        if not all(callable(mw) for mw in self.middleware):
            raise TypeError(f"job {self.name!r}: middleware: must be a tuple of functions")

    def bind(self, args: list[Any] | dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Check ``args`` against the signature and type hints; return the call's args.

        Values are converted as msgspec converts JSON (a dict to a dataclass or Struct
        the hint names), strictly otherwise: "3" is not an int.
        """
        if isinstance(args, dict) and self._plain is not None:
            # Fast path (most handlers): keyword args, no *args/**kwargs, no type hints.
            names, required = self._plain
            if args.keys() <= names and required <= args.keys():
                return (), args
        if self._shape is not None:
            # Typed handlers: one msgspec conversion checks and converts every argument
            # (the same conversion as below, done in C). Any failure takes the slow path,
            # whose errors name the argument the way Python would.
            by_name, by_position = self._shape
            try:
                if isinstance(args, dict):
                    return (), msgspec.structs.asdict(msgspec.convert(args, by_name))
                if by_position is not None and len(args) <= len(by_position.__struct_fields__):
                    # (array-like Structs ignore extra items: too many is the slow path's)
                    return msgspec.structs.astuple(msgspec.convert(args, by_position)), {}
            except (msgspec.ValidationError, TypeError):
                pass
        try:
            if isinstance(args, list):
                bound = self._signature.bind(*args)
            else:
                bound = self._signature.bind(**args)
        except TypeError as exc:
            raise InvalidArgs(f"{self.name}: {exc}") from None
        for pname, value in list(bound.arguments.items()):
            hint = self._types.get(pname)
            if hint is None:
                continue
            kind = self._signature.parameters[pname].kind
            try:
                if kind is inspect.Parameter.VAR_POSITIONAL:
                    value = tuple(msgspec.convert(v, hint) for v in value)
                elif kind is inspect.Parameter.VAR_KEYWORD:
                    value = {k: msgspec.convert(v, hint) for k, v in value.items()}
                else:
                    value = msgspec.convert(value, hint)
            except (msgspec.ValidationError, TypeError) as exc:
                raise InvalidArgs(f"{self.name}: argument {pname!r}: {exc}") from None
            bound.arguments[pname] = value
        return bound.args, bound.kwargs
