# The two commands of the README: `make demo` and `make test`. Each creates or updates .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow lint venv clean plotly-bundle

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@# the editable install compiles nothing: without this, PYTHONDONTWRITEBYTECODE=1 machines
	@# recompile every module on every run (0.5 s of a one-case `holodeck test`)
	$(BIN)/python -m compileall -q holodeck_core holodeck_pipelines > /dev/null
	@touch $(STAMP)

venv: $(STAMP)

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
	rm -rf $(VENV) .holodeck .mypy_cache .ruff_cache .pytest_cache
