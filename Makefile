# The two set-up commands of a fresh machine: `make demo` and `make test` (see README.md).

CARGO ?= cargo
HOTTEXT := target/release/hottext

.PHONY: all build runtime test test-recordings lint demo fuzz setup-demo setup-test setup-lint setup-bench bench-order bench-profile bench-hugify bench-postgres bench-postgres-tune bench-demo bench-graph bench-graph-layout bench-nginx bench-blocks clean

all: build runtime

build:
	$(CARGO) build --release --locked

## runtime: the C library (static, shared, constructor and LD_PRELOAD variants) in runtime/build/.
runtime:
	$(MAKE) --no-print-directory -C runtime

## setup-*: install what a target needs on a fresh Debian 12 machine (quick when all is there).
setup-demo setup-test setup-lint setup-bench: setup-%:
	bash scripts/setup.sh $*

## test: every test: the Rust workspace (real perf, real linkers) and the C runtime.
# Every part runs even when an earlier one fails, so one failure does not hide the others.
test: setup-test
	@status=0; \
	$(CARGO) test --workspace --locked --no-fail-fast || status=1; \
	$(CARGO) test --locked -q -p hottext --no-default-features --lib store:: || status=1; \
	$(MAKE) --no-print-directory -C runtime test || status=1; \
	exit $$status

## test-recordings: perf.data files recorded on other machines against perf's own counts. They are
## not in the repository: HOTTEXT_PERF_FIXTURES names their directory (default ../shared/fixtures/perf).
test-recordings: setup-test
	$(CARGO) test --locked -p hottext-cli --test real_recordings -- --ignored

## lint: formatting and clippy with warnings as errors (the C code builds with -Werror).
lint: setup-lint
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

## demo: build hottext and the demo service, profile it, relink with each linker, compare.
demo: setup-demo build
	bash examples/demo-service/demo.sh

## fuzz: every fuzz target under libFuzzer, FUZZ_SECONDS each (default 60; the bench runs 3600).
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_TARGETS="$(FUZZ_TARGETS)" bash scripts/fuzz.sh

## bench-*: benchmarks (not tests); results go to bench/RESULTS.md by hand.
bench-order: setup-bench
	bash bench/order/run.sh

bench-profile: setup-bench
	bash bench/profile/run.sh

bench-hugify: setup-bench
	bash bench/hugify-cost/run.sh

## bench-postgres: PostgreSQL 15 (Debian source) under pgbench, C3/PH/huge pages/BOLT (root, ~45 min).
bench-postgres: setup-bench build runtime
	bash bench/postgres/run.sh

## bench-postgres-tune: `hottext tune` with every knob on bench-postgres's server and load (~20 min).
bench-postgres-tune: setup-bench build
	bash bench/postgres/tune.sh

## bench-demo: the demo's layouts beside lld's CDSort and BOLT 19: simulated misses, requests/s (~30 min).
bench-demo: setup-bench build
	bash bench/demo/run.sh

## bench-nginx: nginx 1.22 (Debian source) relinked the documented way, beside lld's CDSort and BOLT 19:
## simulated iTLB/i-cache misses and requests/s, server mode (~30 min).
bench-nginx: setup-bench build runtime
	bash bench/nginx/run.sh

## bench-graph: the call graph against callgrind's exact one, per recording mode (bench/graph, ~20 min;
## PostgreSQL is built first, ~25 min more, when /tmp/hottext-pg-clang holds none).
bench-graph: setup-bench build
	bash bench/graph/run.sh

## bench-graph-layout: the tail-call program's layout against BOLT 19's, simulated (~5 min).
bench-graph-layout: setup-bench build
	bash bench/graph/layout.sh

## bench-blocks: clang builds of PostgreSQL and the demo: function order, order + split (from the
## samples, and from exact block edges of a callgrind trace), BOLT 19 (function order and full),
## lld's CDSort, from one recording; simulated misses (issue 36, ~1 h).
bench-blocks: setup-bench build
	bash bench/blocks/run.sh

clean:
	$(CARGO) clean
	$(MAKE) -C runtime clean
	rm -rf build
