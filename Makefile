# fairshare: `make demo` shows the main job on the bundled scenario, `make test` runs the
# tests. Both create .venv (python3 -m venv) when it is missing and (re)install the
# package into it only when pyproject.toml changed since the last install (stamp files).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
FS     := $(PY) -m fairshare
STAMP      := $(VENV)/.stamp-install
STAMP_TEST := $(VENV)/.stamp-install-test
# what the install compiles: the sorter core (setup.py)
BUILD_INPUTS := pyproject.toml setup.py src/fairshare/policies/machinery/_hdrf_kernel.pyx \
	src/fairshare/policies/machinery/_dff_kernel.pyx src/fairshare/engine/_fit_kernel.pyx
DEMO_POLICIES := drf hdrf dff
SIM_POLICIES  := drf,hdrf,dff,capacity,fifo
# the online part: the CPU+MIC cluster with the CPUs contended (the bundled scenario's jobs
# leave it at 11% CPU, where every policy prints the same)
SIM_SCENARIO  := examples/dff_contended.yaml
DEMO_OUT      := out/demo

CHROMIUM      := /usr/bin/chromium
CHROMIUM_LOG  := $(VENV)/chromium-install.log
COMPILER_LOG  := $(VENV)/compiler-install.log

.PHONY: demo test bench clean distclean chromium compiler core wheel

$(PY):
	$(PYTHON) -m venv $(VENV)

# Not --quiet: a first install downloads for minutes, and pip's own lines (each package,
# its download's progress bar) show that it is working and on what.
$(STAMP): $(BUILD_INPUTS) | $(PY) compiler
	@echo "installing fairshare and its dependencies into $(VENV) (numpy, scipy, matplotlib, PyYAML):"
	@echo "a few minutes the first time, seconds after that"
	$(PIP) install -e .
	touch $@

$(STAMP_TEST): $(BUILD_INPUTS) | $(PY) compiler
	@echo "installing fairshare with the live and test extras into $(VENV) (Ray, FastAPI, pytest, Playwright, ...):"
	@echo "several minutes the first time, seconds after that"
	$(PIP) install -e '.[test]'
	touch $@ $(STAMP)

# Every step runs even if an earlier one failed; the demo fails at the end if any did.
# Static: one allocation table, the audit, the static comparison. Then the simulation:
# SIM_SCENARIO's jobs (with counts and durations) run under SIM_POLICIES.
demo: $(STAMP)
	@status=0; \
	echo; echo "=== fairshare allocate default --policy dff"; \
	$(FS) allocate default --policy dff || status=1; \
	echo; echo "=== fairshare audit default --policy hdrf"; \
	$(FS) audit default --policy hdrf || status=1; \
	echo; echo "=== static comparison: $(DEMO_POLICIES) on the bundled scenario"; \
	$(PY) examples/compare_static.py default $(DEMO_POLICIES) || status=1; \
	echo; echo "=== fairshare compare $(SIM_SCENARIO) --policies $(SIM_POLICIES) --out $(DEMO_OUT) --seed 1"; \
	$(FS) compare $(SIM_SCENARIO) --policies $(SIM_POLICIES) --out $(DEMO_OUT) --seed 1 || status=1; \
	if [ $$status -eq 0 ]; then echo; echo "open $(DEMO_OUT)/report.html (one report per policy in $(DEMO_OUT)/POLICY/)"; \
	else echo; echo "demo: a step failed (see above)"; fi; \
	exit $$status

# The compiled sorter core's test (tests/test_compiled_core.py) fails where a C compiler
# is present and the core is not built; without one the pure-Python sorters run and the
# core step says so once.
test: $(STAMP_TEST) core chromium
	FAIRSHARE_REQUIRE_COMPILED=$$($(PY) -c "from fairshare.policies.machinery import compiled; print(int(compiled.compiler_present()))") \
	  $(PY) -m pytest --durations=20

# The compiled sorter core needs a C compiler and the Python headers (setup.py); before the
# install, Debian's gcc and python3-dev are installed with apt-get when missing (as root,
# as for chromium). When that is impossible nothing fails: the sorters run their
# pure-Python methods and the core step below says so, once.
compiler: | $(PY)
	@if $(PY) -P src/fairshare/policies/machinery/compiled.py; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing gcc and the Python headers for the compiled sorter core (log: $(COMPILER_LOG))"; \
	  { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y gcc python3-dev; } >$(COMPILER_LOG) 2>&1 \
	    || { tail -n 5 $(COMPILER_LOG); echo "warning: could not install a C compiler; the sorters will run pure-Python"; }; \
	fi

# The compiled sorter core (setup.py, policies/machinery/compiled.py): the install builds
# it where a C compiler and the Python headers are present; when it is missing though they
# are (a tree installed before it existed, or a compiler installed since), build it. Then
# one line: which core runs, compiled or the pure-Python fallback, and why.
core: | $(PY)
	@$(PY) -c "from fairshare.policies.machinery import compiled as c; raise SystemExit(0 if c.available() or not c.compiler_present() else 1)" \
	  || { echo "building the compiled sorter core (setup.py)"; $(PIP) install --no-deps -e .; }
	@$(PY) -c "from fairshare.policies.machinery import compiled; print(compiled.describe())"

# A release's wheel for this platform (compiled core included where a compiler is) and
# the sdist, into dist/; pyproject.toml's [tool.cibuildwheel] builds the manylinux wheels.
wheel: | $(PY)
	$(PIP) install build
	$(PY) -m build --outdir dist .

# The dashboard's browser test drives Debian's Chromium with Playwright (never a browser
# download: no `playwright install`). Installed with apt-get when missing (CI runs as
# root); when that is impossible this step only warns and tests/test_live_dashboard.py
# skips with the reason, so it never fails `make test` by itself.
chromium: | $(PY)
	@if [ -x $(CHROMIUM) ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing Debian's chromium for the dashboard's browser test (log: $(CHROMIUM_LOG))"; \
	  { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; } >$(CHROMIUM_LOG) 2>&1 \
	    || { tail -n 5 $(CHROMIUM_LOG); echo "warning: could not install chromium; the browser test will be skipped"; }; \
	else \
	  echo "warning: $(CHROMIUM) is missing and cannot be installed here (needs root and apt-get); the browser test will be skipped"; \
	fi

# benchmarks/bench_*.py are the benchmarks; other files there are their helpers.
bench: $(STAMP)
	@set -e; found=0; \
	for f in benchmarks/bench_*.py; do \
	  [ -e "$$f" ] || continue; found=1; \
	  echo "=== $$f"; $(PY) "$$f"; \
	done; \
	[ $$found -eq 1 ] || echo "no benchmarks (benchmarks/bench_*.py) yet"

clean:
	rm -rf build dist out .pytest_cache .hypothesis src/*.egg-info $(STAMP) $(STAMP_TEST)
	rm -f src/fairshare/policies/machinery/_hdrf_kernel.c src/fairshare/policies/machinery/_hdrf_kernel.*.so
	rm -f src/fairshare/policies/machinery/_dff_kernel.c src/fairshare/policies/machinery/_dff_kernel.*.so
	rm -f src/fairshare/engine/_fit_kernel.c src/fairshare/engine/_fit_kernel.*.so
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -print -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
