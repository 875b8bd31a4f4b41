"""Every number setting and handler option has a range: out of range is refused, naming
the setting, from code, the environment, the worker's flags and the shipped config."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from rota import ConfigError, Retry, Settings, WorkerPool, load_settings
from rota.cli.common import ExitError, resolve
from rota.config.settings import FIELDS
from rota.protocol.bounds import HANDLER, JOB, MAX_DELAY, SETTINGS, Bound, check
from rota.protocol.job import Reason, now_ms
from rota.protocol.rows import Fetched
from rota.protocol.rows import Retry as Again
from rota.worker.registry import Handler
from rota.worker.runner import _failure

ROOT = Path(__file__).parents[2]


#: What a user may hand over by mistake: no number, or no sensible one.
ODD: list[Any] = [math.nan, math.inf, -math.inf, -1, -0.5, 0, 0.0, 1e-320, 1e300, -1e300]


WILD = st.one_of(
    st.sampled_from(ODD),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
)


#: Text a variable or a flag may hold.
TEXT = st.one_of(
    WILD.map(str),
    st.sampled_from(["nan", "inf", "-inf", "1e30", "100000000", "1e999", "-0", "abc", "1_0"]),
)


QUICK = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _in_range(value: Any, bound: Bound, *, nullable: bool = False) -> bool:
    return (nullable and value is None) or check("value", value, bound) is None


def _judge(
    attempt: Callable[[], Any], words: tuple[str, ...], errors: tuple[type[Exception], ...]
) -> tuple[bool, Any]:
    """``(True, what attempt returned)``, or ``(False, None)`` after checking that the
    refusal names every one of ``words``."""
    try:
        return True, attempt()
    except errors as exc:
        message = str(exc)
        assert all(w in message for w in words), message
        assert "\n" not in message, message
        return False, None


def test_every_number_setting_has_a_range() -> None:
    numbers = {n for n, f in FIELDS.items() if f.type in (int, float)}
    assert numbers == set(SETTINGS)
    for bound in (*SETTINGS.values(), *HANDLER.values(), *JOB.values()):
        assert math.isfinite(bound.lo) and math.isfinite(bound.hi) and bound.lo <= bound.hi


def test_the_shipped_config_and_the_docs_show_every_range() -> None:
    toml = (ROOT / "src" / "rota" / "rota.toml").read_text(encoding="utf-8")
    missing = [n for n, b in SETTINGS.items() if f"# Range: {b}.\n# {n} = " not in toml]
    assert missing == []
    docs = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    assert all(f"`{n}`" in docs.split("### The range of every number")[1] for n in SETTINGS)


@QUICK
@given(name=st.sampled_from(sorted(SETTINGS)), value=WILD)
def test_settings_from_code_are_within_range_or_refused_naming_them(name: str, value: Any) -> None:
    bound = SETTINGS[name]
    taken, built = _judge(lambda: Settings(**{name: value}), (name,), (ConfigError,))
    assert taken == _in_range(value, bound) or (name, taken) in {
        ("lease", False),  # within range, and not longer than the heartbeat
        ("heartbeat_interval", False),
    }
    if taken:
        assert _in_range(getattr(built, name), bound)
    # WorkerPool(...) refuses at once what it would refuse at its run
    taken, _pool = _judge(lambda: WorkerPool(**{name: value}), (name, "from code"), (ConfigError,))
    assert taken == (value is None or _in_range(value, bound))


@QUICK
@given(name=st.sampled_from(sorted(SETTINGS)), text=TEXT)
def test_settings_from_the_environment_are_within_range_or_refused_naming_them(
    name: str, text: str
) -> None:
    variable = f"ROTA_{name.upper()}"
    taken, built = _judge(
        lambda: load_settings(env={variable: text}), (name, variable), (ConfigError,)
    )
    if taken:
        assert _in_range(getattr(built, name), SETTINGS[name])
    for absurd in ("nan", "1e30", "-1e300", "1e999"):
        with pytest.raises(
            ConfigError, match=rf"^{name}: .*\(from environment variable {variable}\)$"
        ):
            load_settings(env={variable: absurd})


async def _nap() -> None:
    pass


@QUICK
@given(option=st.sampled_from(sorted(HANDLER)), value=WILD)
def test_handler_options_are_within_range_or_refused_at_registration(
    option: str, value: Any
) -> None:
    pool = WorkerPool()
    taken, _ = _judge(
        lambda: pool.job(name="nap", **{option: value})(_nap),
        (option, "'nap'"),
        (ValueError, TypeError),
    )
    nullable = option not in ("priority", "max_fails")
    assert taken == _in_range(value, HANDLER[option], nullable=nullable)
    if taken:
        assert getattr(pool.handlers["nap"], option) == value


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"timeout": -1}, r"job 'nap': timeout: must be from 0\.001 to 315360000, got -1"),
        ({"timeout": math.nan}, r"job 'nap': timeout: must be a finite number, got nan"),
        ({"keep_result": math.nan}, r"job 'nap': keep_result: must be a finite number"),
        ({"max_fails": True}, r"job 'nap': max_fails: must be a whole number from 1"),
        ({"backoff": 30}, r"job 'nap': backoff: must be a function, got 30"),
        (
            {"idle_timeout": math.nan},
            r"^job 'nap': idle_timeout: must be a finite number, got nan$",
        ),
        ({"idle_timeout": 0}, r"^job 'nap': idle_timeout: must be from 0\.01 to 315360000, got 0$"),
        ({"idle_timeout": 1e300}, r"^job 'nap': idle_timeout: must be from 0\.01 to 315360000"),
    ],
)
def test_a_handler_option_out_of_range_is_refused_not_ignored(
    options: dict[str, Any], words: str
) -> None:
    pool = WorkerPool()
    with pytest.raises((ValueError, TypeError), match=words):
        pool.job(name="nap", **options)(_nap)
    assert pool.handlers == {}


@QUICK
@given(value=WILD)
def test_a_retry_delay_is_within_range_or_refused_at_construction(value: Any) -> None:
    taken, retry = _judge(lambda: Retry(delay=value), ("Retry: delay",), (ValueError,))
    assert taken == _in_range(value, JOB["delay"], nullable=True)
    if taken:
        assert retry.delay == value


def _job(failures: int = 0) -> Fetched:
    return Fetched("j1", "nap", "tok", failures + 1, failures, 0, b"{}", 0, None, None)


@QUICK
@given(value=st.one_of(WILD, st.just(ValueError("no backoff"))), failures=st.integers(0, 100))
def test_a_backoff_result_never_leaves_the_range(value: Any, failures: int) -> None:
    """NaN, inf, 1e300, a negative, text or a raising backoff: the retry is due within
    ten years, and a value out of range is one warning naming the handler."""

    def backoff(n: int) -> Any:
        if isinstance(value, Exception):
            raise value
        return value

    handler = Handler(name="nap", func=_nap, max_fails=1000, backoff=backoff)
    before = now_ms()
    with capture_logs() as logs:
        outcome = _failure(_job(failures), handler, Reason.ERROR, "boom")
    assert isinstance(outcome, Again)
    assert before <= outcome.due <= now_ms() + MAX_DELAY * 1000
    warned = [e for e in logs if e["event"] == "backoff out of range"]
    if _in_range(value, JOB["delay"]):
        assert warned == []
        assert abs(outcome.due - before - value * 1000) <= now_ms() - before + 1
    else:
        assert len(warned) == 1
        assert warned[0]["job_name"] == "nap" and warned[0]["value"] == repr(value)[:200]


COUNTS = st.one_of(st.integers(-(10**6), 10**12), st.sampled_from([0, 1, 10_000, 10_001, 10**30]))


SECONDS = st.one_of(
    st.floats(-1e6, 1e300, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 0.05, 0.1, 86400.0, 86400.5, -1.0]),
)


@QUICK
@given(flag=st.sampled_from(["concurrency", "prefetch", "lease", "grace"]), data=st.data())
def test_worker_flags_are_within_range_or_refused_naming_the_flag(
    flag: str, data: st.DataObject
) -> None:
    """What ``rota worker --FLAG`` hands the settings, once click parsed the flag."""
    bound = SETTINGS[flag]
    value = data.draw(COUNTS if bound.whole else SECONDS)
    taken, built = _judge(
        lambda: resolve(None, None, **{flag: value}), (f"--{flag}",), (ExitError,)
    )
    if taken:
        assert _in_range(getattr(built, flag), bound)
    else:  # a lease within range must still outlast the heartbeat
        assert not _in_range(value, bound) or flag == "lease"
