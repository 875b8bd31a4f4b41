"""The order the suite runs in: the longest work first, so that no test process is left
alone at the end with one long test while the others idle.

Each run keeps how long every test took in pytest's cache (``rota/durations``); the next
run sorts by it. A fresh clone has no cache and starts from :data:`SEED`, the longest
tests as measured. Tests that share a module-scoped fixture (a browser, a running UI, a
TLS server) stay together, so that fixture is set up once: with ``--dist loadgroup``
(`make check`, `make test`) :class:`Scheduler` hands each such module's tests to one
process as a unit, and every other test on its own, in this order, as processes free
up. (xdist's own loadgroup renames node ids to group them, which pytest 9 ignores.)
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

CACHE_KEY = "rota/durations"
GROUPS_KEY = "rota/groups"

#: Seconds per test (setup, call and teardown) of the longest tests, for a run without
#: a cache; the cache's figures win.
SEED: dict[str, float] = {
    "tests/test_container.py::test_dockerfile_install_steps_work_in_a_fresh_venv": 60,
    "tests/test_bench_ab.py::test_the_same_build_twice_reads_alike": 50,
    "tests/test_bench_smoke.py::test_bench_smoke_reports_every_workload_for_rota": 40,
    "tests/chaos/test_fuzz_payloads.py::"
    "test_whatever_others_write_ends_complete_or_dead_and_the_pool_goes_on": 36,
    "tests/web/test_schema.py::test_generated_requests_get_no_server_error[positive]": 35,
    "tests/test_cli_refusals.py::test_commands_on_a_read_only_replica": 34,
    "tests/test_cli.py::test_waiting_list_and_delete": 33,
    "tests/chaos/test_full_redis.py::test_full_redis": 32,
    "tests/test_cli_refusals.py::test_enqueue_on_a_full_redis": 28,
    "tests/test_acl.py::test_the_lines_in_the_docs_are_the_ones_rota_acl_prints": 21,
    "tests/test_args.py::test_codec_round_trips_any_json_object": 20,
    "tests/test_cli.py::test_group_show": 19,
    "tests/chaos/test_short_outage.py::test_outages_shorter_than_the_lease_run_no_job_twice": 18,
    "tests/test_cli.py::test_queue_pause_resume_clear": 16,
    "tests/test_redis_cost.py::test_callgrind_counts_instructions_per_job": 16,
    "tests/web/test_schema.py::test_generated_requests_get_no_server_error[negative]": 15,
    "tests/test_group_resume.py::"
    "test_a_group_cut_short_waits_and_the_same_call_again_completes_it": 15,
    "tests/test_cli_sets.py::test_scheduled_list_run_now_and_delete": 15,
    "tests/test_cli.py::test_dead_list_retry_delete": 15,
    "tests/test_pool_throughput.py::test_ten_thousand_jobs_two_pools_exactly_once": 14,
    "tests/web/test_secrets.py::test_an_open_ui_on_the_network_needs_a_flag_that_says_so": 13,
    "tests/test_cli_sets.py::test_retry_set_list_run_now_and_delete": 12,
    "tests/test_cron.py::test_next_fire_matches_a_minute_by_minute_search": 11,
    "tests/topology/test_cluster.py::"
    "test_three_namespaces_through_a_failover_and_a_slot_migration[kill]": 11,
    "tests/test_redis_cost.py::test_lua_costs_prints_a_figure_for_every_step": 10,
    "tests/test_tls.py::test_the_cli_runs_over_tls_and_says_what_is_wrong": 10,
    "tests/web/test_browser.py::test_every_page_loads_with_data": 12,
    "tests/web/test_browser.py::test_flow_and_group_pages": 12,
    "tests/web/test_browser_operate.py::test_a_queues_jobs_page_by_page": 10,
}


class Scheduler(LoadScopeScheduling):  # type: ignore[misc]  # xdist has no types
    """xdist's scope scheduler over the units of :func:`pytest_collection_modifyitems`:
    the tests of a module-scoped fixture, or one test; the first free process takes the
    next unit in collection order (the longest first)."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        self._config = config
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # written by the first process while it collected
            cache = self._config.cache
            self._groups = cache.get(GROUPS_KEY, {}) if cache is not None else {}
        return self._groups.get(nodeid, nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Scheduler | None:
    if config.getoption("dist") != "loadgroup":
        return None
    config.option.loadscopereorder = False  # the collection's order is the plan
    return Scheduler(config, log)


def _group(item: pytest.Item) -> str | None:
    """The module of ``item`` when it uses a fixture set up once per module (or class):
    its tests must run in one process for that to hold."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for defs in info.name2fixturedefs.values():
        if defs and defs[-1].scope in ("module", "class", "package"):
            return item.nodeid.split("::")[0]
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    known: dict[str, float] = dict(SEED)
    if config.cache is not None:
        known.update(config.cache.get(CACHE_KEY, {}))
    units: dict[str, list[pytest.Item]] = defaultdict(list)
    groups: dict[str, str] = {}
    for item in items:
        group = _group(item)
        if group is not None:
            groups[item.nodeid] = group
        units[group or item.nodeid].append(item)
    length = {unit: sum(known.get(i.nodeid, 0.0) for i in its) for unit, its in units.items()}
    order = sorted(units, key=lambda unit: -length[unit])  # stable: ties keep their place
    items[:] = [item for unit in order for item in units[unit]]
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker == "gw0" and config.cache is not None:  # for the controller's Scheduler
        config.cache.set(GROUPS_KEY, groups)


class _Timer:
    """Adds up each test's phases as reported to the controlling process."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] += report.duration


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller, or a run without xdist
        config.pluginmanager.register(_Timer(), "rota-timer")


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    timer = config.pluginmanager.get_plugin("rota-timer")
    if isinstance(timer, _Timer) and timer.seconds and config.cache is not None:
        kept: dict[str, float] = config.cache.get(CACHE_KEY, {})
        kept.update({nodeid: round(s, 2) for nodeid, s in timer.seconds.items()})
        config.cache.set(CACHE_KEY, kept)
