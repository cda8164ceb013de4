# The two commands of the README: `make demo` and `make test`. Each creates or updates .venv
# with exactly what uv.lock says (every distribution, with hashes); `make lock` refreshes it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# uv, pinned with hashes in requirements-uv.txt, lives in a venv of its own: `uv sync` removes
# from .venv whatever uv.lock does not list, uv included
UV_VENV := .uv
UV := $(UV_VENV)/bin/uv
export UV_PROJECT_ENVIRONMENT := $(VENV)
export UV_PYTHON_DOWNLOADS := never

.PHONY: demo test test-slow lint venv lock clean plotly-bundle

$(UV): requirements-uv.txt
	@test -x $(UV_VENV)/bin/python || $(PYTHON) -m venv $(UV_VENV)
	$(UV_VENV)/bin/python -m pip install --quiet --require-hashes --no-deps -r requirements-uv.txt
	@touch $(UV)

$(STAMP): pyproject.toml uv.lock $(UV)
	@$(UV) lock --check --quiet || { echo "make: pyproject.toml and uv.lock disagree;" \
		"run 'make lock' (or '$(UV) lock' to change only what pyproject.toml asks) and commit" \
		"uv.lock" >&2; exit 2; }
	$(UV) sync --frozen --extra dev --python $(PYTHON) --quiet
	@# the editable install compiles nothing: without this, PYTHONDONTWRITEBYTECODE=1 machines
	@# recompile every module on every run (0.5 s of a one-case `holodeck test`)
	$(BIN)/python -m compileall -q holodeck_core holodeck_pipelines > /dev/null
	@touch $(STAMP)

venv: $(STAMP)

# every dependency at the newest version pyproject.toml allows; then run `make test` and commit
lock: $(UV)
	$(UV) lock --upgrade

demo: $(STAMP)
	$(BIN)/holodeck demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -q -n 2 -m "not slow"

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

# plotly.js's basic bundle (the dashboard's charts), of the release the plotly wheel ships;
# then set VERSION in holodeck_core/dashboard/plotly_js.py (tests/test_dashboard_assets.py checks)
VENDOR := holodeck_core/dashboard/vendor
plotly-bundle: $(STAMP)
	version=$$($(BIN)/python -c 'import plotly.offline as o; print(o.get_plotlyjs_version())') && \
	work=$$(mktemp -d) && (cd $$work && npm pack --silent plotly.js-basic-dist-min@$$version && \
	tar xzf plotly.js-basic-dist-min-$$version.tgz) && \
	cp $$work/package/plotly-basic.min.js $(VENDOR)/plotly-basic.min.js && \
	cp $$work/package/LICENSE $(VENDOR)/plotly-basic.LICENSE.txt && rm -rf $$work

clean:
	rm -rf $(VENV) $(UV_VENV) .holodeck .mypy_cache .ruff_cache .pytest_cache
