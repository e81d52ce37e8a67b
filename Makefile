# Lockstep — see README.md. Every target builds what it needs first.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := build

GO        ?= go
BIN       := $(CURDIR)/bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/lockstep-dev/lockstep/internal/version.Lockstep=$(VERSION)
TEST_TIMEOUT ?= 45m

# One build configuration for everything make compiles — static (CGO_ENABLED=0), without this
# machine's paths (-trimpath), as the image ships, and without the compiler's DWARF — so that Go's
# build cache compiles a package once for lockstep, its tests, its image and every tool
# (hack/align keeps the modules' versions shared; hack/build-tools.sh reads LOCKSTEP_GCFLAGS).
# DWARF is what a debugger (delve) reads: stack traces, panics and pprof read the symbol table,
# which stays. Every tool and controller is linked without it (-s -w) anyway, so it only costs
# bin/lockstep's and kubectl-lockstep's, and saves about a tenth of the compiler's CPU on a cold
# build (issue 36). To debug lockstep: `make GCFLAGS= lockstep` (a configuration of its own:
# everything compiles again). GCFLAGS is one GOFLAGS entry, so it holds no space; a -gcflags in
# your GOFLAGS is taken as GCFLAGS.
GCFLAGS ?= $(or $(patsubst -gcflags=%,%,$(lastword $(filter -gcflags=%,$(GOFLAGS)))),all=-dwarf=false)
ifneq ($(word 2,$(GCFLAGS)),)
$(error GCFLAGS="$(GCFLAGS)" has a space, which Go's GOFLAGS cannot carry: give one -gcflags value (e.g. GCFLAGS=all=-N), or build by hand: go build -gcflags='all=-N -l' ./cmd/lockstep)
endif
export LOCKSTEP_GCFLAGS := $(GCFLAGS)
export CGO_ENABLED := 0
export GOFLAGS := -trimpath $(if $(GCFLAGS),-gcflags=$(GCFLAGS)) $(filter-out -trimpath -gcflags=%,$(GOFLAGS))

.PHONY: align build lockstep lockstep-binary tools generate test unit e2e soak sizing demo dev bench verify lint image plugin fmt clean

## build: bin/lockstep plus etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet (v1.37), kwok,
## containerd with its runc shim and ctr and the pause and rank images (real nodes: `dev up --real-nodes`),
## and the controllers of the projects the integration tests run (JobSet, LWS, Kueue, Kubeflow training and MPI operators, KubeRay, Karpenter: hack/integrations)
build: lockstep tools

lockstep: lockstep-binary
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-lockstep ./cmd/kubectl-lockstep   # `kubectl lockstep …` with bin/ on PATH

# lockstep-binary: bin/lockstep alone, what make demo runs (kubectl-lockstep is another link of
# 100 MB, about 10 s here)
lockstep-binary:
	@echo "building lockstep"
	@start=$$SECONDS; $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/lockstep ./cmd/lockstep && echo "built lockstep in $$((SECONDS - start))s"

## image: the OCI image of lockstep for linux/amd64 and linux/arm64, as one archive
## (bin/lockstep-image.tar: an OCI layout with a docker manifest.json), no base image needed
IMAGE_REPO ?= ghcr.io/lockstep-dev/lockstep
IMAGE_TAG  ?= $(VERSION)
image: tools
	for arch in amd64 arm64; do \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(BIN)/linux-$$arch/lockstep ./cmd/lockstep || exit 1; \
	done
	$(BIN)/ociimage -out $(BIN)/lockstep-image.tar -tag $(IMAGE_REPO):$(IMAGE_TAG) -version $(IMAGE_TAG) \
	  linux/amd64=$(BIN)/linux-amd64/lockstep linux/arm64=$(BIN)/linux-arm64/lockstep

## plugin: kubectl-lockstep for krew — one archive per platform and the manifest rendered from
## .krew.yaml (bin/plugin/lockstep.yaml); a release uploads the archives under its tag
PLUGIN_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64
plugin:
	for p in $(PLUGIN_PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; ext=; [[ $$os == windows ]] && ext=.exe; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(BIN)/$$os-$$arch/kubectl-lockstep$$ext ./cmd/kubectl-lockstep || exit 1; \
	  args+=" $$p=$(BIN)/$$os-$$arch/kubectl-lockstep$$ext"; \
	done; \
	$(GO) run ./hack/plugin -tag $(IMAGE_TAG) -out $(BIN)/plugin $$args

## tools: the Kubernetes binaries and dev tools, each skipped when built at its version
tools:
	hack/build-tools.sh

## generate: deepcopy and CRD YAML for api/ (controller-gen, pinned in hack/tools), the typed client
## of api/ in internal/client (client-gen, pinned there too), and the chart's CRDs, RBAC and webhook
## configurations from their sources (hack/chartgen)
generate: tools
	$(BIN)/controller-gen object paths=./api/...
	$(BIN)/controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd
	rm -rf internal/client/clientset   # a type removed from api/ leaves no client behind
	$(BIN)/client-gen --go-header-file /dev/null --input-base github.com/lockstep-dev/lockstep --input api/v1beta1 \
	  --clientset-name versioned --output-pkg github.com/lockstep-dev/lockstep/internal/client/clientset --output-dir internal/client/clientset
	$(GO) run ./hack/chartgen

## test: every test — unit, integration and e2e against the local control plane
test: build image
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...   # -count=1: e2e results depend on bin/, which the test cache does not track

## soak: the gang-lifecycle soak (10 min of gangs succeeding, failing, preempted, losing nodes;
## LOCKSTEP_SOAK_DURATION changes it) — not part of `make test`
soak: build
	$(GO) test -tags soak -count=1 -timeout 40m -v -run TestSoak ./test/soak/

## sizing: memory and CPU of the three components at 1,000 and 5,000 simulated nodes (docs/install.md)
sizing: build
	LOCKSTEP_SIZING_NODES=1000 $(GO) test -tags sizing -count=1 -timeout 60m -v -run TestSizing ./test/sizing/
	LOCKSTEP_SIZING_NODES=5000 $(GO) test -tags sizing -count=1 -timeout 60m -v -run TestSizing ./test/sizing/

## unit: tests that need no cluster, with the race detector
unit:
	CGO_ENABLED=1 $(GO) test -race -short ./internal/...   # the race detector needs cgo

## lint: golangci-lint (govet, staticcheck with its doc-comment checks, errcheck, unused: .golangci.yml)
## and Kubernetes' logcheck (structured logging with klog/logr), both pinned in hack/lint
lint:
	hack/build-tools.sh golangci-lint logcheck
	$(BIN)/golangci-lint run ./...
	$(BIN)/logcheck ./...

## demo: the main job, on the local control plane; builds only what it runs (lockstep, the
## Kubernetes binaries, etcd, kwok and the JobSet controller), each step saying what and how long;
## while they build on a fresh machine, the same scenario simulated (hack/demo.sh)
DEMO_TOOLS := etcd kube-apiserver kube-controller-manager kube-scheduler kwok jobset-controller
demo: lockstep-binary
	hack/demo.sh $(DEMO_TOOLS)

## dev: the local control plane in the foreground until Ctrl-C
dev: build
	$(BIN)/lockstep dev up

## bench: benchmarks of the decision core (hack/bench-core.sh; LOCKSTEP_BENCH_BASELINE_REV=<git revision, e.g. the previous
## release's tag> runs that revision's too, interleaved, and benchstat prints both side by side), then those on the local
## control plane (webhook rate; a huge gang's neighbours; kube-scheduler beside Lockstep at 100 and 1,000 nodes; Kueue with
## and without the placement check)
bench: build
	hack/bench-core.sh
	$(GO) test -tags bench -count=1 -timeout 60m -v -run . ./test/bench/...   # 100 nodes in 5 racks, 3 zones: (a), (b), existing pods + write ceiling, (f) 10 trees (zone over 2 racks; kube-scheduler's CompositePodGroup beside Lockstep); LOCKSTEP_BENCH_BASELINE=<lockstep binary> adds a build
	LOCKSTEP_BENCH_NODES=1000 $(GO) test -tags bench -count=1 -timeout 90m -v -run . ./test/bench/throughput/   # 1,000 nodes in 50 racks: (c), (d), (e) 20 rack-bound gangs × 32 (kube-scheduler's TopologyAwareWorkloadScheduling beside Lockstep)
	$(GO) test -run '^$$' -bench BenchmarkKueuePlacementCheck -benchtime 1x -timeout 30m -v ./test/e2e/integrations/   # Kueue v0.17.0 with and without Lockstep's placement check: quota held by what binds nothing, admission latency
	LOCKSTEP_AUTOSCALING_PROFILE=upstream $(GO) test -run '^$$' -bench BenchmarkGangProvisioning -benchtime 1x -timeout 120m -v ./test/e2e/autoscaling/   # Karpenter v1.14.0: a 16-node gang, zone-a running out partway (LOCKSTEP_BENCH_RUNS runs, default 3), Lockstep asking for it whole vs kube-scheduler pod by pod and the in-tree gang (upstream profile): runs whole, idle node-minutes, nodes left behind

## verify: generated code fresh, formatting, vet, lint, tidy modules — fails on any difference
verify: generate lint
	@git diff --exit-code -- api config/crd internal/client charts || { echo "generated files are stale: run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain --untracked-files=all -- api config/crd internal/client charts)" || { git status --porcelain --untracked-files=all -- api config/crd internal/client charts; echo "untracked generated files: commit them"; exit 1; }
	$(BIN)/helm lint charts/lockstep
	$(BIN)/helm lint charts/lockstep --set certManager.enabled=true,webhook.hostNetwork=true,metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true,metrics.grafanaDashboard.enabled=true
	$(BIN)/helm template lockstep charts/lockstep --kube-version 1.37.2 --namespace lockstep-system > /dev/null
	$(BIN)/helm template lockstep charts/lockstep --kube-version 1.34.0 --namespace gpu-sched -f hack/chart-values-nondefault.yaml > /dev/null
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: run make fmt"; exit 1; }
	$(GO) vet ./...
	$(GO) mod tidy && git diff --exit-code go.mod go.sum
	cd hack/k8s && $(GO) mod tidy && git diff --exit-code go.mod go.sum
	cd hack/tools && $(GO) mod tidy && git diff --exit-code go.mod go.sum
	cd hack/lint && $(GO) mod tidy && git diff --exit-code go.mod go.sum
	cd hack/bench && $(GO) mod tidy && git diff --exit-code go.mod go.sum
	cd hack/node && $(GO) mod tidy && git diff --exit-code go.mod go.sum
	for m in hack/integrations/*/; do (cd $$m && $(GO) mod tidy && git diff --exit-code go.mod go.sum) || exit 1; done
	$(GO) run ./hack/align -check

## align: every module the build compiles at one version across lockstep, hack/k8s, hack/tools, hack/krew, hack/node and
## hack/integrations/*, so the build cache shares its packages (hack/align says which versions move and which stay)
align:
	$(GO) run ./hack/align

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	-$(BIN)/lockstep dev down
	rm -rf $(BIN) .lockstep
