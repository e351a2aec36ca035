# The two commands of the README's quick start, and a few conveniences.
.PHONY: dev install test test-rust test-python bench-build

CARGO ?= cargo
PYTHON ?= python3
# The Python tests run in this project's own virtual environment.
VENV := .venv

# Builds and installs the `tessera` command (into ~/.cargo/bin), then runs the local database
# in the foreground on 127.0.0.1:1982 with its data in ./tessera-data.
dev: install
	tessera dev

install:
	$(CARGO) install --locked --path crates/tessera

# Every test: the Rust workspace (unit, property, model and multi-process tests), then the
# Python client's tests against a real `tessera dev`.
test: test-rust test-python

test-rust:
	$(CARGO) test --workspace --locked

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

test-python: $(VENV)/bin/python
	$(CARGO) build --locked -p tessera
	$(VENV)/bin/python -m pip install --quiet -r python/requirements-test.txt ./python
	TESSERA_BIN=$(CURDIR)/target/debug/tessera $(VENV)/bin/python -m pytest -q python/tests

bench-build:
	$(CARGO) build --release --locked -p tessera
