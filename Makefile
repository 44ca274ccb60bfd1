# celld-operator. `make help` lists the targets.
SHELL := /usr/bin/env bash
GO ?= go
BIN := bin/celld-operator
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
# When the binary was built, as `celld-operator version` prints it (RFC 3339, UTC).
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(BUILD_DATE)
FUZZ_SEQUENCES ?= 20000
CHAOS_KILLS ?= 200
MUTANTS_JOBS ?= 1
MUTANTS_GENERIC ?= all
# Fault injection is compiled only with -tags faults (the e2e tests build the operator so); these
# packages have code and tests under that tag.
FAULT_PKGS := ./drivers/kube ./cmd/celld-operator
# The oldest Kubernetes the README claims (cluster/env.sh), and the e2e tests run on it: the
# lifecycle, admission, tenancy and upgrade tests, where the API server's version shows.
KUBE_OLDEST := $(shell bash -c '. cluster/env.sh && echo $$KUBE_OLDEST')
OLDEST_E2E := ^(TestProfiles|TestGrowAndShrink|TestPersistentFleetDeletion|TestReservedBucket|TestHealNodeDeleted|TestAdmission|TestBucketPolicyTenancy|TestUpgradeAndRollback|TestReadinessDefaultOnCreate)$$

.PHONY: help build test unit e2e e2e-oldest e2e-real chaos fuzz simulate mutants diagram generate verify lint cluster cluster-real demo demo-stop demo-real demo-real-stop bench clean release

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build bin/celld-operator and the kubectl plugin bin/kubectl-celld
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/celld-operator
	$(GO) build -o bin/kubectl-celld ./cmd/kubectl-celld

# A package's tests end with a stack dump after TEST_TIMEOUT: the e2e package, the longest, takes
# about 23 minutes, and a hang must show where it hangs well inside CI's limit.
TEST_TIMEOUT ?= 45m
test: lint ## everything: vet, generated-file check, unit, property, scenario and end-to-end tests
	cluster/tools.sh
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(GO) test -count=1 -tags faults $(FAULT_PKGS)

unit: ## unit, property and scenario tests only (no control plane)
	cluster/tools.sh
	$(GO) test -count=1 $$($(GO) list ./... | grep -vE '/e2e(/realnodes(/.*)?)?$$')
	$(GO) test -count=1 -tags faults $(FAULT_PKGS)

e2e: ## end-to-end tests only: builds (or reuses) and starts the local control plane
	$(GO) test -count=1 -timeout 80m -v ./e2e

e2e-oldest: ## the core e2e tests on the oldest Kubernetes the README claims (KUBE_OLDEST), on a control plane of its own beside the default one, stopped after
	KUBE_VERSION=$(KUBE_OLDEST) cluster/build.sh
	KUBE_VERSION=$(KUBE_OLDEST) $(GO) test -count=1 -timeout 40m -v ./e2e -run '$(OLDEST_E2E)'; status=$$?; KUBE_VERSION=$(KUBE_OLDEST) cluster/down.sh; exit $$status

e2e-real: ## the real-node tests only (root): real kubelets, containers and disks, the operator by Helm
	$(GO) test -count=1 -timeout 40m -v ./e2e/realnodes

chaos: ## long crash chaos: fleet lifecycles while the operator is SIGKILLed CHAOS_KILLS times (default 200; CHAOS_SEED=N reuses a seed)
	CHAOS_KILLS=$(CHAOS_KILLS) $(GO) test -count=1 -v -timeout 80m ./e2e -run '^TestCrashChaos$$'

fuzz: ## a long property run: FUZZ_SEQUENCES random lifecycle sequences (default 20000) across all cores
	hack/fuzz.sh $(FUZZ_SEQUENCES)

simulate: ## one random lifecycle sequence through the simulator with every contract check (SEED=N STEPS=M); the simulator is cmd/celld-sim, not part of the operator binary
	$(GO) run ./cmd/celld-sim --seed $(or $(SEED),1) --steps $(or $(STEPS),40)

mutants: ## mutation score: every mistake of hack/mutants/table.go must fail the tests that need no control plane, then go-gremlins' score per package (MUTANTS_RUN=regexp, MUTANTS_JOBS=N, MUTANTS_GENERIC=all|PKG,...|empty for none)
	$(GO) run ./hack/mutants -run '$(MUTANTS_RUN)' -j $(MUTANTS_JOBS) -generic '$(MUTANTS_GENERIC)'

diagram: ## print the lifecycle diagram (DOT) and refresh the golden files
	$(GO) test ./machine -run TestDiagramGolden -update
	@$(GO) run ./cmd/celld-operator diagram --format dot

generate: ## regenerate deep-copy, CRDs, clientset, listers and informers
	hack/update-codegen.sh

verify: ## fail when generated files are stale
	hack/verify-codegen.sh

lint: verify ## go vet, gofmt and the generated-file check
	$(GO) vet ./...
	$(GO) vet -tags faults $(FAULT_PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

cluster: ## build (or reuse) and start the local control plane
	cluster/build.sh --control-plane
	cluster/up.sh

# Only what the demo runs: the operator (not the kubectl plugin) and the control plane.
demo: ## the local control plane, the operator and both samples, shown converging
	@. cluster/prereqs.sh && prereqs_ensure 'make demo' cluster
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/celld-operator
	hack/demo.sh

demo-stop: ## stop the demo's operator and the local control plane
	hack/demo.sh stop

cluster-real: ## build (or reuse) and start the real-node mode: three real nodes on this machine (root)
	cluster/real.sh up

demo-real: ## the real-node mode (root): the operator from its release image by Helm, both samples as real containers on real disks
	hack/demo-real.sh

demo-real-stop: ## stop the real-node demo and its nodes
	hack/demo-real.sh stop

bench: ## benchmarks against raw Kubernetes on a control plane of its own -> docs/benchmarks.md (BENCH_FLEETS=500: the long mode, a section of its own, with 2,000 fleets at rest and across a restart)
	$(GO) run ./hack/bench

release: ## write a release into _release/VERSION (VERSION=vX.Y.Z): install manifests, Helm chart, OCI image (linux/amd64, linux/arm64), kubectl plugin with its krew manifest, SBOMs, SHA256SUMS, signed with COSIGN_KEY=FILE (password in COSIGN_PASSWORD) with SLSA provenance
	cluster/build.sh kubectl
	cluster/tools.sh helm cyclonedx-gomod cosign
	$(GO) run ./hack/release -version $(VERSION) $(if $(COSIGN_KEY),-cosign-key $(COSIGN_KEY))

clean: ## remove build output (the control plane cache stays)
	rm -rf bin _release
