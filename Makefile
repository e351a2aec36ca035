# The two commands of the README's quick start, and a few conveniences.
.PHONY: dev test install bench-build

CARGO ?= cargo

# Builds and installs the `tessera` command (into ~/.cargo/bin), then runs the local database
# in the foreground on 127.0.0.1:1982 with its data in ./tessera-data.
dev: install
	tessera dev

install:
	$(CARGO) install --locked --path crates/tessera

# Every test of the workspace: unit, property, simulation and multi-process tests.
test:
	$(CARGO) test --workspace --locked

bench-build:
	$(CARGO) build --release --locked -p tessera
