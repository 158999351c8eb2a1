# archlab developer commands. `make help` lists them. Every target does its own set-up
# (scripts/bootstrap), so each works from a fresh clone.

SHELL := /bin/bash
PY := .venv/bin/python
SPEC ?= experiments/quickstart.toml
# Seconds of fuzzing per target: in `make test` (a smoke run), and in `make fuzz`.
FUZZ_TEST_SECONDS ?= 20
FUZZ_SECONDS ?= 3600

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the developer commands
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[1m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: setup
setup: ## Install what is missing (Debian packages, .venv), build engine and extension
	@scripts/bootstrap run

.PHONY: build
build: setup ## Build archlab-engine (release) and the archlab._native extension

.PHONY: run
run: setup ## Run the main job: SPEC (default experiments/quickstart.toml) -> runs/<id>/report.html
	@.venv/bin/archlab run $(SPEC)

.PHONY: report
report: setup ## Regenerate a run's report from the store: make report RUN=<run-id>
	@test -n "$(RUN)" || { echo "usage: make report RUN=<run-id> (see: .venv/bin/archlab runs)"; exit 2; }
	@.venv/bin/archlab report $(RUN)

.PHONY: test
test: ## Run every test (Rust, Python, a short fuzz run of each parser), after set-up
	@scripts/bootstrap test
	@$(MAKE) --no-print-directory lint-checks test-rust test-python test-fuzz

.PHONY: test-rust
test-rust: ## Rust tests only (unit, property, conformance suite)
	cargo test --release --workspace --exclude archlab-py

.PHONY: test-python
test-python: ## Python tests only (spec, store, orchestration, report, statistics)
	$(PY) -m pytest -q

.PHONY: test-fuzz
test-fuzz: ## Fuzz each parser for FUZZ_TEST_SECONDS (default 20), two at a time; fails on a finding, naming its reproducer
	@scripts/fuzz --seconds $(FUZZ_TEST_SECONDS) --parallel 2

.PHONY: fuzz
fuzz: ## Long fuzz runs: FUZZ_SECONDS per target (default 3600), two at a time, at nice 19
	@scripts/bootstrap test
	@nice -n 19 scripts/fuzz --seconds $(FUZZ_SECONDS) --parallel 2 --keep

.PHONY: lint
lint: ## fmt --check, clippy (workspace, fuzz crate), ruff, mypy, no import circle in a crate; `make test` runs these first
	@scripts/bootstrap test
	@$(MAKE) --no-print-directory lint-checks

.PHONY: lint-checks
lint-checks:
	cargo fmt --all -- --check
	cargo fmt --manifest-path fuzz/Cargo.toml -- --check
	cargo clippy --release --workspace --all-targets -- -D warnings
	cargo +nightly clippy --manifest-path fuzz/Cargo.toml --all-targets -- -D warnings
	$(PY) -m ruff check python tests bench scripts
	$(PY) -m mypy
	python3 scripts/check_imports.py

.PHONY: fmt
fmt: ## Format the Rust code
	cargo fmt --all

.PHONY: bench
bench: bench-http bench-archs bench-load bench-sim bench-latency bench-link bench-middleware bench-proxy bench-cluster ## All benchmarks against peers: prints ratios; see bench/README.md

.PHONY: bench-http
bench-http: ## single-thread vs nginx, archlab-engine load vs wrk
	@scripts/bootstrap bench
	@$(PY) bench/http_peers.py

.PHONY: bench-archs
bench-archs: ## every architecture vs nginx on /echo and /prime at 16 and 256 connections
	@scripts/bootstrap bench
	@$(PY) bench/arch_sweep.py

.PHONY: bench-load
bench-load: ## archlab-engine load vs wrk (closed, open with records), vs memcslap; added latency
	@scripts/bootstrap bench
	@$(PY) bench/load_peers.py

.PHONY: bench-middleware
bench-middleware: ## the memcached middleware vs twemproxy: gets, sets, multi-gets per proxy core; added latency
	@scripts/bootstrap bench
	@$(PY) bench/middleware_peers.py

.PHONY: bench-proxy
bench-proxy: ## the HTTP proxy vs HAProxy and nginx as balancers: req/s per balancer core; added latency
	@scripts/bootstrap bench
	@$(PY) bench/proxy_peers.py

.PHONY: bench-latency
bench-latency: ## archlab.latency vs DuckDB + NumPy and polars + NumPy on 10^8 samples and a 1 GB JTL file
	@scripts/bootstrap bench
	@$(PY) bench/latency_scale.py

.PHONY: bench-sim
bench-sim: ## archlab.sim vs SimPy written well, Ciw and the printed SimPy program (Table 8.1)
	@scripts/bootstrap bench
	@$(PY) bench/sim_vs_simpy.py

.PHONY: bench-cluster
bench-cluster: ## a cell's load through a Dask LocalCluster (2 shards) vs locally: start skew, added wall time
	@scripts/bootstrap bench
	@$(PY) bench/cluster_overhead.py

.PHONY: bench-link
bench-link: ## link emulator at 0 ms vs a veth pair vs loopback: throughput, added latency (needs root)
	@scripts/bootstrap bench
	@$(PY) bench/link_overhead.py

.PHONY: duplicates
duplicates: ## Look for code written twice (jscpd, Rust and Python, 80 tokens or more); fails if it cannot run
	npx --yes jscpd@4 --min-tokens 80 --reporters console --format rust,python \
	    --ignore "**/target/**,**/.venv/**,**/fuzz/corpus/**" crates python fuzz bench tests

.PHONY: clean
clean: ## Remove build outputs and the Python environment (keeps runs/)
	cargo clean
	rm -rf .venv
