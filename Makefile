# Every target creates or refreshes .venv itself, so a fresh clone needs nothing but python3 and java.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PYTEST_ARGS ?=
# Bytecode is cached under .venv/pycache, outside the source tree, also where PYTHONDONTWRITEBYTECODE is set (container
# images set it): the tests and the catalog start hundreds of Python processes (nodes, warm spares, xdist workers,
# validators), and each would compile the project's modules from source again (a pytest process collecting the
# catalog: 1.9 s of CPU instead of 0.6 s). A PYTHONPYCACHEPREFIX of your own is kept.
export PYTHONPYCACHEPREFIX ?= $(abspath $(VENV))/pycache
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup test lint bench conformance conformance-runs cluster tlc gate-selfcheck soak pipeline check-java clean mutants mutants-sim faults tlc-slow

check-java:
	@command -v java >/dev/null 2>&1 || { \
	  echo "error: 'java' was not found on PATH. TLC (tla/) and Spark (traces/pipeline) need Java 17."; \
	  echo "       Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless"; \
	  echo "       macOS (Homebrew): brew install openjdk@17"; \
	  exit 1; }
	@java -version 2>&1 | head -n 1 | grep -Eq '"(1[7-9]|2[0-9])' || { \
	  echo "error: Java 17 or newer is needed; found: $$(java -version 2>&1 | head -n 1)"; exit 1; }

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev,pipeline,plots]"
	@touch $(STAMP)

setup: check-java $(STAMP)

test: setup
	$(BIN)/pytest -q $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check spec reference conformance traces tla tests bench
	$(BIN)/mypy spec reference conformance traces tla

bench: setup
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)

# The catalog on one embedded target per CPU (pytest-xdist -n auto; CONFORMANCE_N=0 runs it serially). A
# --target host:port in PYTEST_ARGS is one node: the harness then runs the cases serially and says so.
CONFORMANCE_N ?= auto
conformance: setup
	$(BIN)/pytest conformance -n $(CONFORMANCE_N) --report out/conformance $(PYTEST_ARGS)

# The catalog 20 times in a row (not in make test; CONFORMANCE_N=0 for the serial catalog): stops at the
# first run that fails, whose report stays in out/conformance-runs/N.
CONFORMANCE_RUNS ?= 20
conformance-runs: setup
	@mkdir -p out/conformance-runs
	@for i in $$(seq 1 $(CONFORMANCE_RUNS)); do \
	  log=out/conformance-runs/$$i.log; start=$$(date +%s); \
	  $(BIN)/pytest conformance -q -n $(CONFORMANCE_N) --report out/conformance-runs/$$i $(PYTEST_ARGS) >$$log 2>&1 \
	    || { echo "run $$i of $(CONFORMANCE_RUNS) FAILED: $$log, out/conformance-runs/$$i/index.html"; exit 1; }; \
	  echo "run $$i of $(CONFORMANCE_RUNS): passed in $$(( $$(date +%s) - start )) s ($$(tail -n 1 $$log))"; \
	done

# Detection power: every mutant of tests/mutants/mutants.py against the cases of the clause it breaks (the whole
# catalog when those miss it; black-box, then TLC for the survivors), after the unmutated node passed the whole
# catalog; a table of mutants and the cases that caught them; each kill confirmed by running its case again alone
# (2 of 2); fails if one survives or a kill does not reproduce (a sample runs in make test).
mutants: setup
	$(BIN)/python bench/mutants.py --own-cases --tlc --confirm $(MUTANTS_ARGS)

# The simulator's default run (kraft-tck simulate's defaults; KIP-853 mutants: the reconfig profile) against every
# mutant: which safety invariant each breaks, caught or not, in seconds. Exit 1 if a safety mutant survives.
mutants-sim: setup
	$(BIN)/python bench/mutants_sim.py $(MUTANTS_SIM_ARGS)

# Every fault node against the cases of the rule it breaks, and the KIP-literal and typed-Fetch launchers against
# the whole catalog (make test runs a sample of the faults and of the catalog for the launchers).
faults: setup
	KRAFT_TCK_ALL_FAULTS=1 $(BIN)/pytest -q tests/conformance/test_faults.py $(PYTEST_ARGS)

# The TLC runs too long for make test (the deep reconfiguration model, ~5 min; the committed-only variant; the
# snapshot model at 3 messages in flight, ~3 min; the small model with an observer at 3 messages, ~2 min).
tlc-slow: setup
	KRAFT_TCK_SLOW_TLC=1 $(BIN)/pytest -q tests/tla/test_reconfig.py tests/tla/test_snapshots.py tests/tla/test_tlc.py $(PYTEST_ARGS)

pipeline: setup
	$(BIN)/kraft-tck simulate --seeds 20 --nodes 3 --duration 10s --out out/sim
	$(BIN)/kraft-tck pipeline --input out/sim --out out/pipeline

tlc: setup
	$(BIN)/kraft-tck tlc --config MCKRaft.cfg

# A node started by hand as conformance/README.md says, the harness D seconds later: 5 runs at each
# D = 0, 5, 30 s (about 20-30 minutes); prints a table of runs and failures.
gate-selfcheck: setup
	$(BIN)/python tests/conformance/hand_started_runs.py --runs 5 --delays 0,5,30 $(SELFCHECK_ARGS)

# 1,000 heavy-fault seeds of the simulator on the correct core: no violation expected (a sample runs in make test).
soak: setup
	$(BIN)/kraft-tck simulate --seeds 1000 --first-seed 1000 --nodes 3 --duration 60s --faults heavy --out out/soak

cluster: setup
	$(BIN)/kraft-tck cluster --voters 3 --dir .cluster --base-port 19190

clean:
	rm -rf $(VENV) build *.egg-info .cluster .pytest_cache out
