# Two entry points for a fresh machine with Python 3.11 and git: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The demos need the package alone (no test tools, no Graphiti): a smaller install of their own.
DEMO_STAMP := $(VENV)/.installed-demo
# `make install`: the command for use in any repository, in a virtual environment of its own.
INSTALL_HOME ?= $(HOME)/.local/share/guardkit-state
INSTALL_BIN ?= $(HOME)/.local/bin
# `make install EXTRAS=mcp,graphiti`: the optional extras to install with it (none by default).
EXTRAS ?=

.PHONY: install demo demo-feature test test-fast lint bench soak clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e '.[test,graphiti,mcp]'
	# Embedded graph index: falkordblite has no py3.11 wheel here; this builds it from source (~3 min).
	$(BIN)/python -m pip install -q --ignore-requires-python falkordblite==0.11.0
	# The HTML report's browser tests drive the system's Chromium (never a downloaded one); they are
	# skipped, saying why, where it cannot be installed, so this step never fails the build.
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
		|| { [ "$$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1; } \
		|| { sudo -n apt-get update -qq >/dev/null 2>&1 && sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1; } \
		|| echo "note: Chromium is not installed and could not be (apt-get install chromium); the report's browser tests will be skipped"
	touch $(STAMP)

$(DEMO_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e .
	touch $(DEMO_STAMP)

# The package (a copy, not this checkout) in $(INSTALL_HOME), linked as $(INSTALL_BIN)/guardkit-state.
# EXTRAS=mcp,graphiti adds extras (run again with another EXTRAS to add one: nothing is removed);
# graphiti brings the embedded FalkorDB too. The marker file tells 'install the extra' messages
# (guardkit_state/extras.py) that this copy came from `make install` in this clone.
install:
	$(PYTHON) -m venv $(INSTALL_HOME)
	$(INSTALL_HOME)/bin/python -m pip install -q --upgrade pip
	$(INSTALL_HOME)/bin/python -m pip install -q '.$(if $(strip $(EXTRAS)),[$(strip $(EXTRAS))])'
	$(if $(findstring graphiti,$(EXTRAS)),$(INSTALL_HOME)/bin/python -m pip install -q --ignore-requires-python falkordblite==0.11.0)
	printf '%s\n' "$(CURDIR)" > $(INSTALL_HOME)/guardkit-state-make-install
	mkdir -p $(INSTALL_BIN)
	ln -sf $(INSTALL_HOME)/bin/guardkit-state $(INSTALL_BIN)/guardkit-state
	@$(INSTALL_BIN)/guardkit-state --version
	@case ":$$PATH:" in *":$(INSTALL_BIN):"*) ;; *) echo "note: $(INSTALL_BIN) is not on PATH: add it (export PATH=\"$(INSTALL_BIN):\$$PATH\")";; esac

demo: $(DEMO_STAMP)
	$(BIN)/python examples/run_demo.py

# A whole feature: three tasks in two waves, wave 1's two in parallel, merged in plan order.
demo-feature: $(DEMO_STAMP)
	$(BIN)/python examples/run_feature_demo.py

# Lint and types first: a style or type error fails `make test` (and so CI) before the suite runs.
lint: $(STAMP)
	$(BIN)/ruff check guardkit_state tests examples
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -n 2 tests

# Skip the slow tests (crash injection, fuzzing, graphiti) while developing.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n 2 -m 'not slow' tests

# The LangGraph peer (SqliteSaver) is installed for the benchmark only; the table skips it if absent.
bench: $(STAMP)
	-$(BIN)/python -m pip install -q langgraph-checkpoint-sqlite
	$(BIN)/python -m tests.bench

# 5,000+ kill points, 10x the fuzzing, the remote chaos campaign at 12 workers; GUARDKIT_SOAK=N sets N kill points. Figures: build/reliability/.
# worksteal: the six long kill shards must not queue up behind one worker while the other idles.
soak: $(STAMP)
	rm -rf build/reliability
	GUARDKIT_SOAK=$${GUARDKIT_SOAK:-1} $(BIN)/python -m pytest -n 2 --dist worksteal tests/reliability
	$(BIN)/python -m tests.reliability.summary

clean:
	rm -rf $(VENV) build *.egg-info
