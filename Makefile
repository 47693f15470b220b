# The two commands of the README: `make demo` (the main job) and `make test` (every test).
# Each builds what it needs from nothing but python3 >= 3.11; nothing is installed by hand.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
BUILD_INPUTS := pyproject.toml constraints.txt setup.py src/apogee/_native.c
STAMP  := $(VENV)/.installed-$(shell cat $(BUILD_INPUTS) | cksum | cut -d' ' -f1)

INTEROP_VENV  := .venv-interop
INTEROP_STAMP := $(INTEROP_VENV)/.installed-rocketmq-0.4.4

.PHONY: demo test install interop bench clean

# The editable install also compiles the optional C speed-ups (apogee._native) in place.
$(STAMP): $(BUILD_INPUTS)
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	rm -f src/apogee/_native*.so  # never keep a stale build of the C speed-ups
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test,spark]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# The Apache RocketMQ C++ client (librocketmq 1.2.3 inside the rocketmq==0.4.4 wheel), in a
# venv of its own: its import name `rocketmq` clashes with other packages.
$(INTEROP_STAMP):
	test -x $(INTEROP_VENV)/bin/python || $(PYTHON) -m venv $(INTEROP_VENV)
	$(INTEROP_VENV)/bin/python -m pip install --quiet rocketmq==0.4.4
	touch $(INTEROP_STAMP)

install: $(STAMP)

interop: $(INTEROP_STAMP)

# APOGEE_REQUIRE_NATIVE: a C extension that failed to build fails the run instead of being
# silently replaced by the pure-Python path.  Two pytest-xdist workers: most of a test's time
# is spent waiting on servers, JVMs and the C++ client, so two run side by side on 2 cores.
# One worker runs the Spark tests with the one Spark session, the other the rest, a module at
# a time, longest first (tests/conftest.py; no reorder by size).
test: $(STAMP) $(INTEROP_STAMP)
	APOGEE_REQUIRE_NATIVE=1 $(PY) -m pytest -n 2 --dist loadscope --no-loadscope-reorder

# The demo runs Spark: it needs Java 17+ (one line says so when it is missing).
demo: $(STAMP)
	@$(PY) -m apogee.spark.session >/dev/null
	$(PY) -m apogee demo

bench: $(STAMP)
	@for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(INTEROP_VENV) .pytest_cache .hypothesis build src/*.egg-info src/apogee/*.so
