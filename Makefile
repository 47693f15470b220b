# The two commands of the README: `make demo` (the main job) and `make test` (every test).
# Each builds what it needs from nothing but python3 >= 3.11; nothing is installed by hand.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
NATIVE_SOURCES := $(sort $(wildcard src/apogee/_native/*.c src/apogee/_native/*.h))
BUILD_INPUTS := pyproject.toml constraints.txt setup.py $(NATIVE_SOURCES)
STAMP  := $(VENV)/.installed-$(shell cat $(BUILD_INPUTS) | cksum | cut -d' ' -f1)

INTEROP_VENV  := .venv-interop
INTEROP_STAMP := $(INTEROP_VENV)/.installed-rocketmq-0.4.4

# Every Python process a target starts keeps its compiled bytecode (__pycache__/, ignored by
# git), whatever the caller's environment says: a test run starts hundreds of interpreters
# (servers, CLI runs, Spark's Python workers, three pytest workers and two gates), and with
# PYTHONDONTWRITEBYTECODE each of them compiled Apogee's sources and re-rewrote the test
# modules' asserts again (a NameServer + broker start: ~0.5 s of CPU instead of ~0.35 s).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test install interop bench clean check check-native check-pure lint pytest screenshots

# The dashboard's browser tests (tests/browser) drive Debian's Chromium through Playwright
# (never `playwright install`): installed here when missing, so a machine without it fails
# the run rather than skipping those tests.
CHROMIUM := /usr/bin/chromium

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

$(CHROMIUM):
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
	test -x $(CHROMIUM)

interop: $(INTEROP_STAMP)

# `make test` (what CI runs, `.ci/run`): the whole pytest suite, and next to it the gates of
# `make check` (lint, check-native, check-pure).  The suite spends much of its time waiting on
# servers, JVMs and the C++ client, so the gates run in the background meanwhile, at a lower
# priority (nice 10: they take the CPU the suite leaves idle rather than slow its longest
# worker), each into its own log under build/gates/, printed whole when it ends; the last line
# names every failure, and any failure fails the run.
GATE_DIR := build/gates
GATES    := lint check-native check-pure

# The two venvs (and Chromium) are made side by side: on a clean clone that is the only
# work under way, and it would leave a core idle.
test:
	@$(MAKE) --no-print-directory -j3 $(STAMP) $(INTEROP_STAMP) $(CHROMIUM)
	@rm -rf $(GATE_DIR) && mkdir -p $(GATE_DIR)
	@echo "make test: $(GATES) run in the background (logs in $(GATE_DIR)/, printed after the suite)"
	@for gate in $(GATES); do \
		( start=$$(date +%s); nice -n 10 $(MAKE) --no-print-directory $$gate >$(GATE_DIR)/$$gate.log 2>&1; \
		  echo "$$? $$(( $$(date +%s) - start ))" >$(GATE_DIR)/$$gate.status ) & \
	done; \
	start=$$(date +%s); $(MAKE) --no-print-directory pytest; status=$$?; \
	echo "$$status $$(( $$(date +%s) - start ))" >$(GATE_DIR)/pytest.status; \
	wait; failed=""; summary=""; \
	for gate in $(GATES); do \
		read code secs <$(GATE_DIR)/$$gate.status; \
		echo; echo "=============== make $$gate (exit $$code, $$secs s) ==============="; \
		cat $(GATE_DIR)/$$gate.log; \
	done; \
	for gate in pytest $(GATES); do \
		read code secs <$(GATE_DIR)/$$gate.status; \
		if [ "$$code" = 0 ]; then summary="$$summary $$gate ok ($$secs s);"; \
		else summary="$$summary $$gate FAILED ($$secs s);"; failed="$$failed $$gate"; fi; \
	done; \
	echo; echo "make test:$$summary"; \
	if [ -n "$$failed" ]; then echo "make test FAILED:$$failed (each log is above)"; exit 1; fi

# The gates without the long suite (a minute or two): what a change must pass before `make test`.
check: $(STAMP)
	@$(MAKE) --no-print-directory -k -j3 --output-sync=target $(GATES)

# APOGEE_REQUIRE_NATIVE: a C extension that failed to build fails the run instead of being
# silently replaced by the pure-Python path.  Three pytest-xdist workers on 2 cores: most
# tests spend their time waiting on servers, slaves' 10 s rounds and the C++ client, while
# the Spark tests keep the CPU busy.  One worker runs the tests of the one Spark session,
# the others the rest (the Spark tests with JVMs of their own first), a module at a time,
# longest first (tests/conftest.py; no reorder by size).
pytest: $(STAMP) $(INTEROP_STAMP) $(CHROMIUM)
	APOGEE_REQUIRE_NATIVE=1 $(PY) -m pytest -n 3 --dist loadscope --no-loadscope-reorder

# The static checks, each with no finding allowed (all three run; any finding fails): ruff
# (every Python file of the repository), strict mypy (src/apogee and the test harness,
# [tool.mypy]) and the import contracts of docs/architecture.md ([tool.importlinter]).
lint: $(STAMP)
	@status=0; \
	echo "== ruff check ."; $(VENV)/bin/ruff check . || status=1; \
	echo "== mypy (strict)"; $(VENV)/bin/mypy || status=1; \
	echo "== lint-imports"; $(VENV)/bin/lint-imports --no-cache --no-logo || status=1; \
	exit $$status

# The pure-Python path, which the README promises works without the C extension
# (APOGEE_NO_EXTENSIONS=1, inherited by every server the tests start): the unit tests, and the
# integration tests of sends, batches, pulls, consumers, transactions and a broker restart.
PURE_TESTS := tests/unit tests/integration/test_broker.py tests/integration/client/test_producer.py \
              tests/integration/client/test_push_consumer.py tests/integration/client/test_lite_pull.py \
              tests/integration/test_transactions.py tests/integration/crash/test_broker_sigkill.py
check-pure: $(STAMP)
	APOGEE_NO_EXTENSIONS=1 $(PY) -m pytest -q -rfE -p no:cacheprovider $(PURE_TESTS)

# The C extension built with AddressSanitizer and UndefinedBehaviorSanitizer (into
# build/native-asan, apart from the normal install's in-place build), then the native tests and
# a fuzz of every C function that reads network bytes against it; any sanitizer report fails the
# run. The sanitizer runtime is preloaded because python itself is not built with it;
# PYTHONMALLOC=malloc lets it see every Python object's memory; CPython's own leaks at exit are
# not ours. FUZZ_EXAMPLES per fuzz test
# (300: about 30 s of CPU; `make check-native FUZZ_EXAMPLES=5000` for a longer hunt).
ASAN_DIR      := build/native-asan
ASAN_FLAGS    := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -fno-wrapv -g -O1
FUZZ_EXAMPLES ?= 300
NATIVE_TESTS  := tests/native tests/unit/common/test_accel.py tests/unit/remoting/test_native_frames.py \
                 tests/unit/store/test_native_batch.py tests/unit/client/test_fast_decode.py \
                 tests/unit/remoting/test_codec_fuzz.py tests/unit/store/test_flush.py

$(ASAN_DIR)/.built: $(STAMP) $(NATIVE_SOURCES) setup.py
	rm -rf $(ASAN_DIR)
	APOGEE_NATIVE_CFLAGS="$(ASAN_FLAGS)" $(PY) setup.py -q build_ext --force --build-lib $(ASAN_DIR) \
		--build-temp $(ASAN_DIR)/tmp
	ls $(ASAN_DIR)/apogee/_native*.so  # the build is optional in setup.py: a failed one must stop here
	touch $@

# The reports go to files (pytest captures stderr, and an abort would lose it), printed on failure.
check-native: $(ASAN_DIR)/.built
	rm -f $(ASAN_DIR)/report.*
	cc=$$($(PY) -c 'import sysconfig; print(sysconfig.get_config_var("CC").split()[0])'); \
	LD_PRELOAD="$$($$cc -print-file-name=libasan.so)" \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:log_path=$(CURDIR)/$(ASAN_DIR)/report \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=$(CURDIR)/$(ASAN_DIR)/report \
	PYTHONMALLOC=malloc APOGEE_NATIVE_FILE="$$(ls $(ASAN_DIR)/apogee/_native*.so)" APOGEE_REQUIRE_NATIVE=1 \
	APOGEE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q -p no:cacheprovider $(NATIVE_TESTS) \
	|| { status=$$?; cat $(ASAN_DIR)/report.* 2>/dev/null; exit $$status; }
	@! ls $(ASAN_DIR)/report.* 2>/dev/null  # a report from a subprocess that did not fail its test

# The demo runs Spark: it needs Java 17+ (one line says so when it is missing).
demo: $(STAMP)
	@$(PY) -m apogee.spark.session >/dev/null
	$(PY) -m apogee demo

# Every benchmark of this repository; not figures.py (it rewrites the docs from the records)
# nor peers_bench.py (it needs the shared harness and its peers set up: its docstring).
BENCHES := $(filter-out benchmarks/figures.py benchmarks/peers_bench.py,$(wildcard benchmarks/*.py))

bench: $(STAMP)
	@for b in $(BENCHES); do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(INTEROP_VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache build src/*.egg-info src/apogee/*.so

# The dashboard's pictures in docs/images/, taken by its browser tests (a plain run of the
# tests puts them in build/screenshots/, so `make test` leaves the tree as it was).
screenshots: $(STAMP) $(INTEROP_STAMP) $(CHROMIUM)
	APOGEE_SCREENSHOTS=docs/images $(PY) -m pytest -q tests/browser
