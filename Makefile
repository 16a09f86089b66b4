# esr: External Secrets, in Rust.
# The two commands a newcomer needs: `make demo` and `make test`.

CARGO ?= cargo
NEXTEST := $(shell $(CARGO) nextest --version >/dev/null 2>&1 && echo yes)

.PHONY: all build release sbom deny test test-unit fmt fmt-check clippy crds check-crds manifests image demo e2e e2e-real fuzz \
        bench bench-template bench-testkit bench-memory bench-aws-calls bench-fanout bench-scale clean

all: build

build:
	$(CARGO) build --workspace --bins

# The release binary, with its dependency tree embedded (cargo auditable: a `.dep-v0` section
# that `cargo audit bin`, syft or trivy read). cargo-auditable is installed when missing.
CARGO_AUDITABLE_VERSION := 0.7.7
release:
	@$(CARGO) auditable --version >/dev/null 2>&1 || $(CARGO) install --locked cargo-auditable@$(CARGO_AUDITABLE_VERSION)
	$(CARGO) auditable build --release --locked -p esr

# A CycloneDX SBOM of the esr binary's dependencies: target/sbom/esr.cdx.json (cargo-cyclonedx,
# installed when missing). See docs/supply-chain.md.
CARGO_CYCLONEDX_VERSION := 0.5.9
sbom:
	@$(CARGO) cyclonedx --version >/dev/null 2>&1 || $(CARGO) install --locked cargo-cyclonedx@$(CARGO_CYCLONEDX_VERSION)
	scripts/sbom.sh

# The dependency policy of deny.toml (cargo-deny, installed when missing): licenses, bans,
# sources, and advisories when the RustSec database can be fetched (else a loud NOT CHECKED).
deny:
	scripts/deny.sh

fmt:
	$(CARGO) fmt --all

fmt-check:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Unit and integration tests, with the real moto and OpenBao servers started around them.
# The binaries e2e runs are built first, with the workspace's feature resolution (the same as
# the test run's), and ESR_E2E_NO_BUILD keeps each e2e test process from running its own
# `cargo build -p esr`, whose different feature resolution relinked esr again and again.
test-unit:
	$(CARGO) build --workspace --bins
ifeq ($(NEXTEST),yes)
	ESR_E2E_NO_BUILD=1 scripts/test-servers.sh $(CARGO) nextest run --workspace --no-fail-fast
else
	ESR_E2E_NO_BUILD=1 scripts/test-servers.sh $(CARGO) test --workspace --no-fail-fast
endif

# Everything CI runs: formatting, lints, the dependency policy (`make deny`), all tests.
test: fmt-check clippy deny test-unit

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

# The e2e suite against the cluster of ESR_E2E_KUBECONFIG (kind, k3d, any cluster you may
# write to): applies crds/ server-side, then runs every scenario in parallel, each confined to
# its own namespaces and controller class, each deleting what it created. Scenarios that need
# fault injection or a fresh API server print `skipped:`.
e2e-real:
	@if [ -z "$$ESR_E2E_KUBECONFIG" ]; then \
	  echo "make e2e-real: set ESR_E2E_KUBECONFIG to the kubeconfig of the cluster to test against" >&2; \
	  echo "  (the usual KUBECONFIG is deliberately ignored), e.g. ESR_E2E_KUBECONFIG=\$$HOME/.kube/config make e2e-real" >&2; \
	  exit 2; \
	fi
	kubectl --kubeconfig "$$ESR_E2E_KUBECONFIG" apply --server-side --force-conflicts -f crds/
	kubectl --kubeconfig "$$ESR_E2E_KUBECONFIG" wait --for condition=Established --timeout=60s -f crds/
	scripts/test-servers.sh $(CARGO) nextest run -p esr-e2e --profile e2e-real --no-fail-fast

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
# Options: make bench-scale ARGS="--es 500 --secrets 2000 -- --concurrent 16 --client-qps 0"
bench-scale:
	scripts/bench-scale.sh $(ARGS)
