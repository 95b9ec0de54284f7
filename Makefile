# agent-sandbox reconciler
#
# Two commands matter on a fresh machine with only Go installed:
#   make run    a local Kubernetes cluster with our CRDs installed, ready for kubectl
#   make test   everything CI checks (unit, golden, envtest integration, local-cluster e2e)
#
# Every binary is built from Go modules into bin/ the first time it is needed
# and reused afterwards (bin/ is git-ignored; `make clean` removes it).

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT := $(CURDIR)
BIN := $(ROOT)/bin
WORK := $(ROOT)/.work
export GOBIN := $(BIN)

# Pinned versions. The Kubernetes control plane's version is the one
# tests/tools/go.mod requires, so there is a single place to change it.
K8S_VERSION := $(shell awk '$$1=="k8s.io/kubernetes" {print $$2}' tests/tools/go.mod)
K8S_MAJOR_MINOR := $(subst ., ,$(K8S_VERSION:v%=%))
CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0
KWOK_VERSION ?= v0.8.0
KUSTOMIZE_VERSION ?= v5.8.2
BUF_VERSION ?= v1.75.0
# protoc-gen-go comes from google.golang.org/protobuf: keep it at go.mod's version.
PROTOC_GEN_GO_VERSION ?= v1.36.12
PROTOC_GEN_GO_GRPC_VERSION ?= v1.6.2
# protoc-gen-connect-go comes from connectrpc.com/connect: keep it at go.mod's version.
PROTOC_GEN_CONNECT_GO_VERSION ?= v1.21.1

CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
GOLANGCI_LINT := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
KWOK := $(BIN)/kwok-$(KWOK_VERSION)
KWOKCTL := $(BIN)/kwokctl-$(KWOK_VERSION)
KUSTOMIZE := $(BIN)/kustomize-$(KUSTOMIZE_VERSION)
BUF := $(BIN)/buf-$(BUF_VERSION)
PROTOC_GEN_GO := $(BIN)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION)
PROTOC_GEN_GO_GRPC := $(BIN)/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION)
PROTOC_GEN_CONNECT_GO := $(BIN)/protoc-gen-connect-go-$(PROTOC_GEN_CONNECT_GO_VERSION)
PROTO_TOOLS := $(BUF) $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC) $(PROTOC_GEN_CONNECT_GO)

CONTROL_PLANE := $(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/kube-scheduler $(BIN)/etcd
ENVTEST_ASSETS := $(BIN)/kube-apiserver $(BIN)/etcd
CLUSTER_BINS := $(CONTROL_PLANE) $(KWOK) $(KWOKCTL)

# Tests find the binaries through these variables.
export KUBEBUILDER_ASSETS := $(BIN)
export AGENT_SANDBOX_BIN := $(BIN)

K8S_LDFLAGS := -s -w \
	-X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=$(word 1,$(K8S_MAJOR_MINOR)) \
	-X k8s.io/component-base/version.gitMinor=$(word 2,$(K8S_MAJOR_MINOR))

GO_TEST_FLAGS ?=
TEST_TIMEOUT ?= 40m

##@ Main

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_0-9.-]+:.*##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

.PHONY: run
run: $(CLUSTER_BINS) controller cli runtime router ## Start a local cluster with the CRDs, the controller, the stand-in kubelet (a sandbox-runtime per sandbox Pod), the sandbox router on 127.0.0.1:8080 and the samples; Ctrl-C stops everything.
	$(BIN)/kubectl-sandbox up --foreground --name agent-sandbox --workdir $(WORK)/kwok --bin-dir $(BIN) \
		--controller $(BIN)/sandbox-controller --runtime $(BIN)/sandbox-runtime --router $(BIN)/sandbox-router --samples config/samples

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
CONTROLLER_LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(shell date -u +%Y-%m-%dT%H:%M:%SZ)

# GO_TAGS are the build tags of the controller and of every test run:
# fieldsv1string makes apimachinery hold managedFields field sets as
# interned strings, one copy for every cached object with the same set
# (most of a Sandbox's, Pod's and Service's are), and their deep copies
# free. The image builds the controller with them too (Dockerfile).
GO_TAGS := fieldsv1string

.PHONY: controller
controller: ## Build bin/sandbox-controller (version stamped from git).
	go build -tags $(GO_TAGS) -ldflags "$(CONTROLLER_LDFLAGS)" -o $(BIN)/sandbox-controller ./cmd/sandbox-controller

.PHONY: cli
cli: ## Build bin/kubectl-sandbox and its completion hook bin/kubectl_complete-sandbox (put bin/ on PATH to use them as `kubectl sandbox`).
	go build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/kubectl-sandbox ./cmd/kubectl-sandbox
	go build -o $(BIN)/kubectl_complete-sandbox ./cmd/kubectl_complete-sandbox

# The kubectl plugin's release: one archive per platform (kubectl-sandbox and
# kubectl_complete-sandbox at its top level) and the krew manifest naming them.
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
RELEASE_URL ?= https://github.com/agentsandbox/reconciler/releases/download/$(VERSION)

.PHONY: release-archives
release-archives: ## Build the kubectl plugin's archives for RELEASE_PLATFORMS into .work/release.
	@rm -rf $(WORK)/release && mkdir -p $(WORK)/release
	@set -e; for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; d=$(WORK)/release/$$os-$$arch; \
		GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=$(VERSION)" -o $$d/kubectl-sandbox ./cmd/kubectl-sandbox; \
		GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 go build -trimpath -o $$d/kubectl_complete-sandbox ./cmd/kubectl_complete-sandbox; \
		tar -C $$d -czf $(WORK)/release/kubectl-sandbox_$(VERSION)_$${os}_$${arch}.tar.gz kubectl-sandbox kubectl_complete-sandbox; \
		echo $(WORK)/release/kubectl-sandbox_$(VERSION)_$${os}_$${arch}.tar.gz; \
	done

.PHONY: krew-manifest
krew-manifest: ## Write dist/sandbox.yaml, the krew manifest of release VERSION (vX.Y.Z) with the archives' sha256 (upload the archives to RELEASE_URL).
	@echo "$(VERSION)" | grep -Eq '^v[0-9]+\.[0-9]+\.[0-9]+' || { echo "krew-manifest: VERSION=$(VERSION) is not a release; e.g. make krew-manifest VERSION=v0.1.0"; exit 1; }
	$(MAKE) --no-print-directory release-archives
	go run ./cmd/krew-manifest -version $(VERSION) -url-base $(RELEASE_URL) $(WORK)/release/*.tar.gz > dist/sandbox.yaml.tmp
	mv dist/sandbox.yaml.tmp dist/sandbox.yaml

.PHONY: runtime
runtime: ## Build bin/sandbox-runtime, the in-sandbox runtime server (version stamped from git).
	go build -ldflags "-X main.version=$(VERSION) -X main.commit=$(COMMIT)" -o $(BIN)/sandbox-runtime ./cmd/sandbox-runtime

.PHONY: router
router: ## Build bin/sandbox-router, the data plane's router (version stamped from git).
	go build -ldflags "-X main.version=$(VERSION) -X main.commit=$(COMMIT)" -o $(BIN)/sandbox-router ./cmd/sandbox-router

.PHONY: test
test: verify lint test-go ## Run everything CI checks: generation drift, lint, unit, golden, envtest integration and local-cluster e2e tests.

.PHONY: test-go
test-go: $(CLUSTER_BINS) ## Run all Go tests (unit, golden, integration, e2e) without the verify and lint steps.
	@$(E2B_SDK_CHECK)
	go test -count=1 -tags $(GO_TAGS) -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) $$(go list ./... | grep -v /tests/e2e/faults)
	$(MAKE) --no-print-directory test-faults

# TestE2BSDK (tests/e2e) runs the e2b SDK from npm (tests/e2b) with Node.js;
# without node and npm it skips, and the suite says so up front.
E2B_SDK_CHECK := command -v node >/dev/null && command -v npm >/dev/null || \
	echo "note: node or npm is not on PATH: TestE2BSDK (the e2b SDK against the local cluster) will be skipped"

# The fault scenarios run alone: they load a 14-node cluster with bursts of
# hundreds of Sandboxes, and on a 2-core machine another cluster starting
# next to them can miss its startup deadline.
.PHONY: test-faults
test-faults: $(CLUSTER_BINS) ## Run the reliability scenarios (crash, API server restart, failover, other writers, hostile input).
	go test -count=1 -tags $(GO_TAGS) -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) ./tests/e2e/faults/

.PHONY: test-docs
test-docs: $(CLUSTER_BINS) ## Run every command README.md and docs/*.md show, against one local cluster (DOCS_PAGES="docs/x.md" for some pages), and check their links.
	go test -count=1 -tags $(GO_TAGS) -timeout 20m -v ./tests/docs/ 2>&1 | grep -v '^=== RUN'

.PHONY: test-unit
test-unit: ## Run the tests that need no API server (render, api, golden).
	go test -count=1 -tags $(GO_TAGS) -short $(GO_TEST_FLAGS) ./...

.PHONY: test-integration
test-integration: $(ENVTEST_ASSETS) ## Run the envtest integration tests (real kube-apiserver + etcd).
	go test -count=1 -tags $(GO_TAGS) $(GO_TEST_FLAGS) ./tests/integration/...

.PHONY: test-e2e
test-e2e: $(CLUSTER_BINS) ## Run the end-to-end tests on a local kwok cluster (then the fault scenarios).
	@$(E2B_SDK_CHECK)
	go test -count=1 -tags $(GO_TAGS) -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) ./tests/e2e/
	$(MAKE) --no-print-directory test-faults

FUZZTIME ?= 30s
FUZZ_TARGETS := ./render:FuzzSandbox ./render:FuzzTemplate ./render:FuzzWarmPool ./render:FuzzClaim \
	./policy:FuzzLoad ./policy:FuzzCheck ./api/v1alpha1:FuzzSandboxRoundTrip ./api/v1alpha1:FuzzHubRoundTrip \
	./api/extensions/v1alpha1:FuzzClaimRoundTrip

.PHONY: fuzz
fuzz: ## Fuzz render, conversion and policy loading for FUZZTIME each (seeded from golden/; plain go test runs the seeds).
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; echo "fuzzing $$pkg $$name for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

.PHONY: bench
bench: $(CLUSTER_BINS) ## Run the benchmarks on a local cluster and print JSON (BENCH_N=500 by default; BENCH_RUN=TestBenchDataplane for the data plane only, BENCH_RUN=TestBenchE2B for the e2b SDK).
	AGENT_SANDBOX_BENCH=1 BENCH_N=$${BENCH_N:-500} BENCH_OUT=$${BENCH_OUT:-$(WORK)/bench.json} \
		BENCH_DATAPLANE_OUT=$${BENCH_DATAPLANE_OUT:-$(WORK)/bench-dataplane.json} \
		BENCH_E2B_OUT=$${BENCH_E2B_OUT:-$(WORK)/bench-e2b.json} \
		go test -count=1 -tags $(GO_TAGS) -timeout 180m -run "$${BENCH_RUN:-TestBench}" -v ./tests/bench/ 2>&1 | grep --line-buffered -v '^=== RUN'

.PHONY: golden
golden: ## Rewrite golden files from the current code (review the diff like code).
	go test -count=1 ./render/ ./policy/ ./webhooks/ ./cmd/kubectl-sandbox/ -update

##@ Code generation and checks

.PHONY: generate
generate: $(CONTROLLER_GEN) $(PROTO_TOOLS) ## Regenerate deepcopy, apply configurations, CRDs, RBAC the sandboxd gRPC and the envd Connect code.
	rm -rf api/v1beta1/applyconfiguration api/extensions/v1beta1/applyconfiguration
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) applyconfiguration:externalApplyConfigurations="$(EXTERNAL_ACS)" paths=./api/...
	rm -rf config/crd/bases
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=agent-sandbox-controller paths=./apply/... paths=./webhooks/... paths=./cmd/... output:rbac:artifacts:config=config/rbac
	@# The built-in policy bundles, as plain ValidatingAdmissionPolicy YAML for
	@# the API server itself (kubectl apply -k config/policies), and the default
	@# modes: written by the Go code (policy.ConfigFiles), whose DefaultBundles
	@# is the one list of default bundles.
	rm -rf config/policies
	go run ./policy/internal/writeconfig .
	@# The Helm chart's copies of what config/ holds (charts/agent-sandbox/files/):
	@# its templates read them, so the chart and the kustomize bundle share one source.
	$(MAKE) --no-print-directory chart-files
	@# sandboxd's gRPC API (dataplane/sandboxd/proto/process/v1) -> dataplane/sandboxd/processpb,
	@# with the pinned buf and plugins from bin/.
	rm -f dataplane/sandboxd/processpb/*.pb.go
	cd dataplane/sandboxd/proto && PATH="$(BIN):$$PATH" $(BUF) generate
	@# envd's Connect API (dataplane/envd/proto) -> dataplane/envd/envdpb, the
	@# same way, with protoc-gen-connect-go for the handlers and clients.
	rm -f dataplane/envd/envdpb/*/*.pb.go dataplane/envd/envdpb/*/*connect/*.connect.go
	cd dataplane/envd/proto && PATH="$(BIN):$$PATH" $(BUF) generate

CHART := charts/agent-sandbox
CHART_FILES := rbac webhook router router/portforward router/e2b policies policy-labels monitoring
# Templated in the chart itself (its settings change them).
CHART_SKIP := config/router/router.yaml config/policy-labels/modes.yaml

.PHONY: chart-files
chart-files: ## Copy config/'s YAML (and the dashboard) into the Helm chart's files/ (part of make generate).
	rm -rf $(CHART)/files && mkdir -p $(CHART)/files
	@set -e; for d in $(CHART_FILES); do mkdir -p $(CHART)/files/$$d; \
		for f in config/$$d/*.yaml config/$$d/*.json; do \
			[ -e "$$f" ] && [ "$${f##*/}" != kustomization.yaml ] && [[ " $(CHART_SKIP) " != *" $$f "* ]] && cp "$$f" $(CHART)/files/$$d/ || true; done; done
	@# The CRDs as compact JSON: Helm keeps the chart and the rendered manifest in a
	@# release Secret (at most 1 MiB), which indented YAML CRDs would overflow.
	mkdir -p $(CHART)/files/crd/bases
	go run ./tests/helm/compactjson -o $(CHART)/files/crd/bases config/crd/bases/*.yaml

# Types from other packages that our apply configurations refer to, mapped to
# their apply configurations, so every field (down to a container's ports) is
# tracked by server-side apply rather than sent as a whole struct.
EMPTY :=
SPACE := $(EMPTY) $(EMPTY)
CORE_API := github.com/agentsandbox/reconciler/api/v1beta1
CORE_AC := $(CORE_API)/applyconfiguration/api/v1beta1
CG_CORE := k8s.io/client-go/applyconfigurations/core/v1
CG_NET := k8s.io/client-go/applyconfigurations/networking/v1
EXTERNAL_ACS := $(subst $(SPACE),;,$(strip \
	$(foreach t,PodTemplate PersistentVolumeClaimTemplate PodMetadata EmbeddedObjectMetadata,$(CORE_API).$(t)@$(CORE_AC)) \
	$(foreach t,PodSpec PersistentVolumeClaimSpec,k8s.io/api/core/v1.$(t)@$(CG_CORE)) \
	$(foreach t,NetworkPolicyIngressRule NetworkPolicyEgressRule,k8s.io/api/networking/v1.$(t)@$(CG_NET))))
##@ Deploy

.PHONY: dist
dist: $(KUSTOMIZE) ## Render the release bundles dist/install.yaml (config/default) and dist/install-extensions.yaml (config/extensions).
	@mkdir -p dist
	$(KUSTOMIZE) build config/default > dist/install.yaml
	$(KUSTOMIZE) build config/extensions > dist/install-extensions.yaml

.PHONY: deploy
OVERLAY ?= default

deploy: $(KUSTOMIZE) ## Install the CRDs, RBAC and controller in the current kubectl context (server-side apply). IMG=<image> sets the image; OVERLAY=extensions adds the extension controllers.
	@if [ -n "$${IMG:-}" ]; then cd config/default && $(KUSTOMIZE) edit set image sandbox-controller=$$IMG; fi
	$(KUSTOMIZE) build config/$(OVERLAY) | kubectl apply --server-side -f -

.PHONY: deploy-router
deploy-router: $(KUSTOMIZE) ## Install the sandbox router (config/router) next to the controller. IMG=<image> sets the image (the controller's; it carries /sandbox-router).
	@if [ -n "$${IMG:-}" ]; then cd config/router && $(KUSTOMIZE) edit set image sandbox-controller=$$IMG; fi
	$(KUSTOMIZE) build config/router | kubectl apply --server-side -f -

.PHONY: deploy-router-namespace
deploy-router-namespace: $(KUSTOMIZE) ## Give NAMESPACE=<ns> its own router and sandbox-router-svc (config/router/namespaced), for upstream's Go SDK port-forward mode. IMG=<image> sets the image.
	@test -n "$(NAMESPACE)" || { echo "NAMESPACE=<namespace> is required"; exit 1; }
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	printf 'resources:\n- %s\nnamespace: %s\n' "$$(realpath --relative-to="$$tmp" "$(CURDIR)/config/router/namespaced")" "$(NAMESPACE)" > "$$tmp/kustomization.yaml" && \
	if [ -n "$${IMG:-}" ]; then (cd "$$tmp" && $(KUSTOMIZE) edit set image sandbox-controller=$$IMG); fi && \
	$(KUSTOMIZE) build --load-restrictor LoadRestrictionsNone "$$tmp" | kubectl apply --server-side -f -

IMG ?= sandbox-controller:$(VERSION)
KIND_VERSION ?= v0.33.0

.PHONY: docker-build
docker-build: ## Build the controller image IMG, which also carries the sandbox router (Docker needed).
	docker build -t $(IMG) --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) .

RUNTIME_IMG ?= sandbox-runtime:$(VERSION)

.PHONY: docker-build-runtime
docker-build-runtime: ## Build the runtime image RUNTIME_IMG (the Dockerfile's sandbox-runtime stage; Docker needed).
	docker build --target sandbox-runtime -t $(RUNTIME_IMG) --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) .

.PHONY: kind-up
kind-up: controller cli ## Like make run, on a kind cluster (Docker needed); the controller runs locally.
	$(BIN)/kubectl-sandbox up --kind --foreground --name agent-sandbox --workdir $(WORK)/kind \
		--controller $(BIN)/sandbox-controller --samples config/samples

.PHONY: kind-deploy
kind-deploy: docker-build $(KUSTOMIZE) ## Load IMG into the kind cluster agent-sandbox and deploy it there (Docker needed).
	go run sigs.k8s.io/kind@$(KIND_VERSION) load docker-image $(IMG) --name agent-sandbox
	$(MAKE) deploy IMG=$(IMG)

.PHONY: undeploy
undeploy: $(KUSTOMIZE) ## Remove what deploy installed (deletes the CRDs and so every Sandbox).
	$(KUSTOMIZE) build config/$(OVERLAY) | kubectl delete --ignore-not-found -f -

.PHONY: verify
verify: $(CONTROLLER_GEN) $(KUSTOMIZE) $(PROTO_TOOLS) ## Fail when generated code, CRDs, RBAC, go.mod/go.sum or formatting differ from what the tools produce, or the Dockerfile cannot build.
	@before=$$($(GENERATED_SUM)); \
	$(MAKE) --no-print-directory generate dist >/dev/null; \
	go mod tidy; (cd tests/tools && go mod tidy); \
	after=$$($(GENERATED_SUM)); \
	if [ "$$before" != "$$after" ]; then \
		diff <(echo "$$before") <(echo "$$after") || true; \
		echo "verify: the files above differ from what 'make generate' and 'go mod tidy' produce; they have been regenerated, review and commit them"; exit 1; fi
	@unformatted=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	if [ -n "$$unformatted" ]; then echo "verify: gofmt would change: $$unformatted"; exit 1; fi
	cd tests/tools && go vet ./...
	@# The Dockerfile's build stage compiles from exactly what it copies (no Docker needed).
	go test -count=1 ./tests/image/
	@echo "verify: generated files, modules, formatting and the Dockerfile's build are up to date"

# Checksums of everything generation or tidying may touch.
GENERATED_SUM := find api config dist charts dataplane/sandboxd/proto dataplane/sandboxd/processpb dataplane/envd/proto dataplane/envd/envdpb go.mod go.sum tests/tools/go.mod tests/tools/go.sum -type f -print0 | sort -z | xargs -0 sha256sum

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (with importas and depguard).
	$(GOLANGCI_LINT) run ./...

.PHONY: fmt
fmt: ## gofmt the tree.
	gofmt -w $$(git ls-files '*.go')

##@ Binaries (built from Go modules into bin/ when missing or out of date)

.PHONY: tools
tools: $(CLUSTER_BINS) $(CONTROLLER_GEN) $(GOLANGCI_LINT) $(KUSTOMIZE) $(PROTO_TOOLS) ## Build every tool and control-plane binary.

TOOLS_MOD := tests/tools/go.mod tests/tools/go.sum

$(BIN)/kube-apiserver $(BIN)/kube-controller-manager $(BIN)/kube-scheduler: $(TOOLS_MOD)
	@mkdir -p $(BIN)
	@echo "building $(@F) $(K8S_VERSION) from k8s.io/kubernetes (first build takes several minutes)"
	cd tests/tools && go build -trimpath -ldflags "$(K8S_LDFLAGS)" -o $@.tmp k8s.io/kubernetes/cmd/$(@F)
	mv $@.tmp $@

$(BIN)/etcd: $(TOOLS_MOD) tests/tools/etcd/main.go
	@mkdir -p $(BIN)
	cd tests/tools && go build -trimpath -ldflags "-s -w" -o $@.tmp ./etcd
	mv $@.tmp $@

# go-installed tools are versioned in their file name; the plain name is a
# symlink, so a version bump in this file rebuilds the tool.
$(CONTROLLER_GEN):
	$(call go-install,sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_TOOLS_VERSION),controller-gen)

$(GOLANGCI_LINT):
	$(call go-install,github.com/golangci/golangci-lint/v2/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION),golangci-lint)

$(KUSTOMIZE):
	$(call go-install,sigs.k8s.io/kustomize/kustomize/v5,$(KUSTOMIZE_VERSION),kustomize)

$(BUF):
	$(call go-install,github.com/bufbuild/buf/cmd/buf,$(BUF_VERSION),buf)

$(PROTOC_GEN_GO):
	$(call go-install,google.golang.org/protobuf/cmd/protoc-gen-go,$(PROTOC_GEN_GO_VERSION),protoc-gen-go)

$(PROTOC_GEN_GO_GRPC):
	$(call go-install,google.golang.org/grpc/cmd/protoc-gen-go-grpc,$(PROTOC_GEN_GO_GRPC_VERSION),protoc-gen-go-grpc)

$(PROTOC_GEN_CONNECT_GO):
	$(call go-install,connectrpc.com/connect/cmd/protoc-gen-connect-go,$(PROTOC_GEN_CONNECT_GO_VERSION),protoc-gen-connect-go)

$(KWOK):
	$(call go-install,sigs.k8s.io/kwok/cmd/kwok,$(KWOK_VERSION),kwok)

$(KWOKCTL):
	$(call go-install,sigs.k8s.io/kwok/cmd/kwokctl,$(KWOK_VERSION),kwokctl)

# go-install,package,version,name: install package@version as bin/name-version
# and point bin/name at it.
define go-install
	@mkdir -p $(BIN)
	@echo "installing $(1)@$(2)"
	rm -f $(BIN)/$(3)
	go install $(1)@$(2)
	mv $(BIN)/$(3) $(BIN)/$(3)-$(2)
	ln -sf $(3)-$(2) $(BIN)/$(3)
endef

.PHONY: clean
clean: ## Stop local clusters and remove bin/ and .work/.
	-[ ! -x $(BIN)/kubectl-sandbox ] || $(BIN)/kubectl-sandbox down --all --workdir $(WORK)/kwok --bin-dir $(BIN)
	rm -rf $(BIN) $(WORK)
