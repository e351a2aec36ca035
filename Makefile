# The two commands of the README's quick start, and a few conveniences.
.PHONY: dev install prereqs test test-tools test-rust test-go test-python test-scripts test-long bench-build bench-failover bench-transfers bench-advisor bench-documents bench-twitter bench-splits bench-peers bench-security plots bench-scale bench-memory bench-spread bench-replica-reads cassandra-fetch

CARGO ?= cargo
PYTHON ?= python3
# Go builds tools/lincheck (Porcupine), which the cluster test uses to check linearizability.
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
# The Python tests run in this project's own virtual environment.
VENV := .venv

# Builds and installs the `tessera` command (into ~/.cargo/bin), then runs the local database
# in the foreground on 127.0.0.1:1982 with its data in ./tessera-data.
dev: install
	tessera dev

install:
	$(CARGO) install --locked --path crates/tessera

# protoc, which the benchmark's peer targets need (feature `peers`: etcd's client compiles etcd's
# .proto files; the database itself builds with cargo alone): installed with apt-get (as root,
# or through sudo) when it is missing, so that `make test` and `make bench-build` work on a
# fresh Debian or Ubuntu machine; elsewhere, a message saying what to do.
prereqs:
	@command -v protoc >/dev/null 2>&1 || [ -n "$${PROTOC:-}" ] || { \
	  echo "make: protoc is missing; installing Debian's protobuf-compiler" >&2; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  { command -v apt-get >/dev/null 2>&1 && $$SUDO apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq protobuf-compiler >/dev/null; } || { \
	    echo "make: could not install protoc: install the Protocol Buffers compiler (protoc) and run again" >&2; exit 2; }; }

# Every test: the linearizability checker's own tests, the Rust workspace (unit, property,
# simulation, model and multi-process tests, the cluster test among them), then the Python
# client's tests against a real `tessera dev` and a local cluster.
test: prereqs test-tools test-go test-rust test-python test-scripts

# What `make test` needs beyond building: Go (tools/lincheck, go.mod's version) and Python 3
# with venv, checked first so that a missing one is named at once, not after the Rust tests.
test-tools:
	@[ -x "$(GO)" ] || command -v "$(GO)" >/dev/null 2>&1 || { \
	  echo "make test: Go is missing: install Go 1.26 or later (https://go.dev/dl), or give GO=/path/to/go; the cluster test checks linearizability with tools/lincheck" >&2; exit 2; }
	@$(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || { \
	  echo "make test: $(PYTHON) lacks venv/ensurepip, which the Python client's tests need: install Python 3 with venv (Debian: apt-get install python3-venv)" >&2; exit 2; }

test-go:
	$(GO) -C tools/lincheck vet ./...
	$(GO) -C tools/lincheck test ./...

# Formatting and lints first: an unformatted file (run `cargo fmt --all` to mend it) or a clippy
# warning fails the suite.
test-rust:
	$(CARGO) fmt --version >/dev/null 2>&1 || rustup component add rustfmt
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --version >/dev/null 2>&1 || rustup component add clippy
	$(CARGO) clippy --workspace --all-targets --locked --features tessera-bench/peers -- -D warnings
	PATH="$(dir $(GO)):$$PATH" $(CARGO) test --workspace --locked --features tessera-bench/peers

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# With the features `test-rust` built with, so the binary is already there.
test-python: $(VENV)/bin/python
	$(CARGO) build --locked -p tessera --features tessera-bench/peers
	@# The client's atomic operations are written from one table: stale generated code fails first.
	$(PYTHON) scripts/gen-python-ops.py --check
	$(VENV)/bin/python -m pip install --quiet -r python/requirements-test.txt ./python
	TESSERA_BIN=$(CURDIR)/target/debug/tessera $(VENV)/bin/python -m pytest -q python/tests

# The statistics of scripts/advisor-report.py (Kendall's tau-b, errors, gains) and the charts and
# tables of scripts/plot-bench.py (every scripts/test_*.py), standard library only.
test-scripts:
	$(PYTHON) -m unittest discover -s scripts -p 'test_*.py'

bench-build: prereqs
	$(CARGO) build --release --locked -p tessera --features peers

# The long runs that `make test` keeps short: 10 000 seeds of the replication simulation
# (crashes, pauses, partitions, restarts, state transfers in three seeds of four; a few minutes).
test-long:
	TESSERA_SIM_SEEDS=10000 $(CARGO) test --locked --release -p tessera-replication --test simulation -- --nocapture

# Time from `kill -9` of a server until writes to every key it led succeed again, over 10 runs
# on a local cluster of 3 coordinators and 5 servers (prints JSON: each run, median, max).
bench-failover:
	PATH="$(dir $(GO)):$$PATH" $(CARGO) test --locked --release -p tessera --test failures -- --ignored --nocapture failover_time

# What state transfer costs on a local cluster of 3 coordinators and 5 servers holding 50 000
# objects of 1 KB: throughput before, during and after the copy, and the copy's MB/s against
# the load's, after `kill -9` of a server and for a sixth server joining; 3 runs each (prints
# JSON: every run and the medians). TESSERA_TRANSFER_MB_S sets the servers' --transfer-mb-s.
bench-transfers:
	$(CARGO) test --locked --release -p tessera --test transfers_bench -- --ignored --nocapture --test-threads 1

# The advisor's evaluation (docs/advisor.md, seed 000 §5.2): the hotel workloads A, B and C in
# three mixes each; for each, the advisor's top 5 configurations, 5 random others and every
# baseline, measured on a local `tessera dev` (fresh data directory and port, removed after)
# with constants from `tessera calibrate` on it; raw JSON, tables and SVG plots into
# docs/advisor/. About 2 h 10 min with the defaults; knobs in scripts/bench-advisor.sh.
bench-advisor:
	CARGO="$(CARGO)" PYTHON="$(PYTHON)" scripts/bench-advisor.sh

# Dynamic spaces (docs/benchmarks.md "Dynamic spaces"): seed 004's micro-benchmark and a
# DBLP-shaped bibliography against a Tessera dynamic space, a typed space and PostgreSQL's
# JSONB with a GIN index (its own temporary cluster); medians of 3 runs and ratios as JSON on
# stdout. About 20 minutes with the defaults; knobs in scripts/bench-documents.sh.
bench-documents:
	scripts/bench-documents.sh

# Placements (docs/benchmarks.md "Placements: the Twitter workload"): seed 003's Twitter
# workload on local 5-server clusters (K = 1 and 3; random, ordered and tagged tweets; both
# fan-outs), and routed over computed clusters of 100 and 200 servers; medians as JSON on
# stdout. Knobs in scripts/bench-twitter.sh.
bench-twitter:
	scripts/bench-twitter.sh

# An ordered space's objects over 5 servers with key-region splits off and on (docs/placements.md
# "Key regions that follow the data"); JSON on stdout. Knobs in scripts/bench-splits.sh.
bench-splits:
	scripts/bench-splits.sh

# Tessera beside the stores users would pick instead (PostgreSQL, Redis, etcd, Cassandra):
# searches on secondary attributes (where the system has them) and YCSB a, c, e, every system
# started by the script, durable, and pinned; JSON on stdout. Needs Debian's postgresql,
# redis-server and etcd-server, java 17 and maven; Cassandra's jars are downloaded on the first
# run (or by cassandra-fetch). Knobs in scripts/bench-peers.sh (SYSTEMS, YCSB, RECORDS, ...).
bench-peers:
	scripts/bench-peers.sh

# What metrics, client tokens and TLS cost: YCSB c and a against tessera dev with and without
# metrics, with --auth, over TLS and both, interleaved, RUNS each; JSON on stdout
# (docs/benchmarks.md "What security costs").
bench-security:
	scripts/bench-security.sh

# docs/plots/peers-*.svg (throughput and p50/p99 charts) from the newest committed
# docs/results/peers-*.json, or from PEERS_JSON=FILE; `scripts/plot-bench.py FILE --markdown`
# prints docs/benchmarks.md's per-workload tables from the same file. Standard library only.
PEERS_JSON ?= $(shell git log -1 --diff-filter=AM --format= --name-only -- 'docs/results/peers-*.json' 2>/dev/null | head -n 1)
plots:
	@test -n "$(PEERS_JSON)" || { echo "make plots: no docs/results/peers-*.json committed; give PEERS_JSON=FILE" >&2; exit 2; }
	$(PYTHON) scripts/plot-bench.py $(PEERS_JSON) --out docs/plots

# What grows with the server count (docs/scale.md): clusters of 8, 16 and 32 `tessera server`
# processes and a coordinator on this machine, small data: configuration size, time to install
# an epoch, coordinator CPU, server CPU per operation, the client's planning time per search,
# and a projection to 32 and 64 servers; JSON on stdout. About 6 minutes with the defaults;
# knobs in scripts/bench-scale.sh (SERVERS, COORDINATORS, RECORDS, ...).
bench-scale:
	scripts/bench-scale.sh

# Peak resident memory of one server at 1 M and at 10 M small objects (issue 12 item 5: at
# most 1.25x for 10x the data); ~15 min and 3.5 GB of disk here. Knobs in scripts/bench-memory.sh.
bench-memory:
	scripts/bench-memory.sh

# How evenly 100 000 listings (scripts/listings.py) spread over the regions and servers of each
# subspace before and after `tessera recut`, on a local 5-server `tessera dev`: regions holding
# objects, objects stored and led per server, the fullest region's share, regions and servers a
# range search contacts, and CLI operations per second before, during and after the re-cut.
# Tables on stdout, JSON in docs/results/spread.json. About 8 minutes on 2 cores, most of it the
# re-cut under the mixed workload; options in scripts/bench-spread.py (--objects, --skip-mixed).
bench-spread:
	$(MAKE) bench-build
	$(PYTHON) scripts/bench-spread.py --out docs/results/spread.json

# Who answers a cluster's gets (docs/benchmarks.md "Reads from every replica"): a local
# 4-server K=2 `tessera dev`, YCSB C zipfian, the hottest key alone and YCSB A (half updates),
# with gets from the point leader only and from any replica; each server's share of the gets
# (from its metrics), the operations per second and p99s. About 5 minutes; knobs in
# scripts/bench-replica-reads.py.
bench-replica-reads:
	$(MAKE) bench-build
	TESSERA_BIN=target/release/tessera $(PYTHON) scripts/bench-replica-reads.py

# Apache Cassandra 5.0's jars from Maven Central into ~/.cache/tessera-bench (once; a second
# run downloads nothing). The bench crate's Cassandra test runs once they are there.
cassandra-fetch:
	scripts/cassandra.sh fetch
