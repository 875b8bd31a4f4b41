PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: venv redis lint test demo fmt clean

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

lint: venv
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/mypy

test: venv redis
	$(MAKE) lint
	$(BIN)/pytest -q $(PYTEST_ARGS)

demo: venv redis
	$(BIN)/rota demo

fmt: venv
	$(BIN)/ruff format src tests
	$(BIN)/ruff check --fix src tests

clean:
	rm -rf $(VENV) dist build .pytest_cache .mypy_cache .ruff_cache .hypothesis .coverage htmlcov
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	find . -name "*.egg-info" -type d -prune -exec rm -rf {} +
