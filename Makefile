# The commands users and CI run. `make test` and `make demo` are the README's two commands.
SHELL := /bin/bash
STACK := deploy/dev/stack.sh

.PHONY: help dev-up dev-down dev-status test demo lint fmt migrate bench soak

help:
	@echo "make demo      start the local stack and the server; create, scale, audit and destroy a hosted cluster"
	@echo "make test      start the local stack if needed and run the whole test suite"
	@echo "make dev-up    start Postgres, NATS (JetStream), moto and the kube emulator on 127.0.0.1; write .dev/env"
	@echo "make dev-down  stop the processes dev-up started"
	@echo "make lint      cargo fmt --check, clippy with warnings as errors, and the deploy/ checks (hadolint)"
	@echo "make bench     throughput and latency on a durable Postgres, release build (deploy/bench/run.sh)"
	@echo "make soak      a mixed load for 20 minutes at 70% of capacity: nothing fails, nothing grows (deploy/bench/soak.sh)"

dev-up:
	@$(STACK) up

dev-down:
	@$(STACK) down

dev-status:
	@$(STACK) status

# Runs every test, those that need the stack included (HCPFLOW_REQUIRE_STACK turns a
# missing stack into a failure). A stack this target started is stopped afterwards.
test:
	@$(STACK) run env HCPFLOW_REQUIRE_STACK=1 deploy/dev/run-tests.sh

# The engine, the workflows, the offline audit and the replay tests must stay pure: no
# I/O crate in their dependency graph (replay-tests replays JSON; it needs none of them).
IO_CRATES := sqlx|async-nats|aws-sdk|aws-config|kube|hyper|reqwest|tokio
PURE_CRATES := hcpflow-engine hcpflow-hypershift hcpflow-audit hcpflow-replay-tests
# The NATS protocol is for any client: none of the server's database, cloud or Kubernetes crates.
SERVER_CRATES := sqlx|aws-sdk|aws-config|kube|hcpflow-eventstore|hcpflow-aws|hcpflow-kube

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings
	@for crate in $(PURE_CRATES); do \
	  found=$$(cargo tree --locked -p $$crate -e normal --prefix none | grep -E '^($(IO_CRATES))[ -]' | sort -u); \
	  if [ -n "$$found" ]; then echo "$$crate must not depend on I/O crates: $$found"; exit 1; fi; \
	done; echo "$(PURE_CRATES) are free of I/O crates"
	@found=$$(cargo tree --locked -p hcpflow-protocol -e normal --prefix none | grep -E '^($(SERVER_CRATES))[ -]' | sort -u); \
	if [ -n "$$found" ]; then echo "hcpflow-protocol must not depend on the server's crates: $$found"; exit 1; fi; \
	echo "hcpflow-protocol is free of the server's crates"
	@cargo run --locked -q -p hcpflow-workers --bin hcpflow -- nats permissions --check deploy/nats/hcpflow-accounts.conf
	@deploy/lint.sh

fmt:
	cargo fmt --all

# Figures, not tests: a stack of its own with a durable Postgres (fsync on), the release
# binary in both deployments (all roles in one process; workflow and activity apart).
bench:
	@deploy/bench/run.sh

# Not a test: 20 minutes (SOAK_MINUTES) of mixed load on the bench's durable stack.
soak:
	@deploy/bench/soak.sh

migrate: dev-up
	@set -a; . .dev/env; set +a; cargo run --quiet --locked -p hcpflow-workers -- migrate

# Creates, scales, audits and destroys a hosted cluster through a real server over NATS,
# Postgres, moto and the Kubernetes emulator (deploy/dev/demo.sh).
demo: dev-up
	@cargo build --quiet --locked -p hcpflow-workers
	@deploy/dev/demo.sh
