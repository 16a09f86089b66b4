# esr: External Secrets, in Rust.
# The two commands a newcomer needs: `make demo` and `make test`.

CARGO ?= cargo
NEXTEST := $(shell $(CARGO) nextest --version >/dev/null 2>&1 && echo yes)

.PHONY: all build release test test-unit fmt fmt-check clippy crds check-crds manifests image demo e2e fuzz \
        bench bench-template bench-testkit bench-memory bench-aws-calls bench-fanout clean

all: build

build:
	$(CARGO) build --workspace --bins

release:
	$(CARGO) build --release -p esr

fmt:
	$(CARGO) fmt --all

fmt-check:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Unit and integration tests, with the real moto and OpenBao servers started around them.
test-unit:
	$(CARGO) build -p esr -p esr-testkit --bins
ifeq ($(NEXTEST),yes)
	scripts/test-servers.sh $(CARGO) nextest run --workspace --no-fail-fast
else
	scripts/test-servers.sh $(CARGO) test --workspace --no-fail-fast
endif

# Everything CI runs: formatting, lints, all tests.
test: fmt-check clippy test-unit

# Coverage-guided fuzzing of templates, manifest validation and the KES converter (libFuzzer;
# nightly). `make test` runs the bounded, stable property-test fuzzing; see fuzz/README.md.
FUZZ_SECONDS ?= 20
fuzz:
	@$(CARGO) fuzz --version >/dev/null 2>&1 || $(CARGO) install --locked cargo-fuzz
	for t in template validate kes; do \
		$(CARGO) +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 || exit 1; \
	done

crds:
	$(CARGO) run -q -p esr -- crdgen --out crds

# deploy/charts/esr/templates/crds (from crds/) and deploy/manifests (the chart rendered with default values).
manifests:
	$(CARGO) run -q -p esr-deploytool --bin esr-deploytool

# The container image (OCI, in target/image/) without a Docker daemon: buildah, as root.
image:
	scripts/image.sh

demo:
	scripts/demo.sh

e2e:
	scripts/test-servers.sh $(CARGO) nextest run -p esr-e2e --no-fail-fast

clean:
	$(CARGO) clean

# Benchmarks measure speed and memory; they are not tests.
bench-template:
	scripts/bench-template.sh
bench-testkit:
	scripts/bench-testkit.sh
bench-memory:
	scripts/bench-memory.sh
bench-aws-calls:
	scripts/test-servers.sh scripts/bench-aws-calls.sh
bench-fanout:
	scripts/bench-fanout.sh
