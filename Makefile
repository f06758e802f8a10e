# nodeready: `make help` lists the targets.

# The release: VERSION holds it, the manifests and the chart name its image, and the release
# workflow refuses any other tag. A clean checkout of that tag builds the release; anything
# else is a development build named by git describe (v0.1.0-3-gabc1234, -dirty when changed).
RELEASE   := $(shell cat VERSION)
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo $(RELEASE)-dev)
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
IMAGE     ?= ghcr.io/nodeready/nodeready:$(VERSION)
PLATFORMS ?= linux/amd64,linux/arm64
LDFLAGS   := -s -w -X main.version=$(VERSION) -X main.revision=$(REVISION)
# Bounds one e2e package's go test, so that a hang ends with every goroutine's stack. Not
# tighter: on a fresh 2-core machine, where the builds share the cores with the suites,
# suites/verify took 2369 s in one make test with empty caches, and in another it passed
# 40 min with one test left (TestForeignTaintGetsNoAgent) and TestNodeReady under way.
E2E_TIMEOUT ?= 60m

export CGO_ENABLED ?= 0

# Every go command builds with -trimpath, as the binaries and the release must: go vet, go test
# and go run then reuse the packages the builds compiled (and the control planes' builds share
# the standard library and common modules with the e2e tests) instead of compiling each twice.
ifeq ($(filter -trimpath,$(GOFLAGS)),)
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)
endif

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the static agent binary into bin/nodeready
	go build -trimpath -ldflags "$(LDFLAGS)" -o bin/nodeready .

.PHONY: plugin
plugin: ## Build the kubectl plugin into bin/kubectl-nodeready (on the PATH, kubectl nodeready runs it)
	go build -trimpath -ldflags "$(LDFLAGS)" -o bin/kubectl-nodeready ./cmd/kubectl-nodeready

# The kubectl plugin's release: one archive per platform and the krew manifest
# (plugins/krew/nodeready.yaml filled in), into bin/plugin, by e2e/cmd/krew.
PLUGIN_PLATFORMS ?= linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64

.PHONY: plugin-release
plugin-release: ## Build the kubectl plugin for PLUGIN_PLATFORMS, its archives and its krew manifest into bin/plugin
	@for p in $(subst $(comma), ,$(PLUGIN_PLATFORMS)); do \
		echo "go build kubectl-nodeready $$p"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} go build -trimpath -ldflags "$(LDFLAGS)" -o bin/$${p%/*}_$${p#*/}/kubectl-nodeready ./cmd/kubectl-nodeready || exit 1; \
	done
	rm -rf bin/plugin
	cd e2e && go run ./cmd/krew -version $(VERSION) -out $(CURDIR)/bin/plugin \
		-binary $(subst $(space),$(comma),$(foreach p,$(subst $(comma), ,$(PLUGIN_PLATFORMS)),$(p)=$(CURDIR)/bin/$(subst /,_,$(p))/kubectl-nodeready))

.PHONY: run
run: build ## Verify this machine with --dry-run (no cluster needed; never writes)
	-./bin/nodeready --dry-run

# side_by_side,A,B makes A and B at the same time, and fails once both are done if either failed.
side_by_side = $(MAKE) --no-print-directory $(1) & first=$$!; \
	rc=0; $(MAKE) --no-print-directory $(2) || rc=1; wait $$first || rc=1; exit $$rc

.PHONY: test
test: ## Run every test: unit tests (race detector) beside e2e on a real local control plane
	@# Side by side, not one after the other: the unit tests' binaries run one package at a time
	@# at the end and left a fifth of two cores idle (fresh machine: 322 s, CPU 516 s), which the
	@# e2e lanes' builds fill. Either failing fails make test once both are done.
	+$(call side_by_side,unit,e2e)

# go test without its own go vet: make vet runs all of vet's analyzers over both modules (and CI
# runs it before make test), while go test's curated few, keyed apart from go vet's, vet every
# package each test imports again, down to the standard library: on a cold build cache about
# 350 CPU-s for one e2e package's 786 dependencies, and again for the race detector's builds.
GO_TEST := go test -vet=off -count=1

.PHONY: unit
unit: ## Unit tests with the race detector
	CGO_ENABLED=1 scripts/timed.sh "make unit" $(GO_TEST) -race ./...

.PHONY: vet
vet: ## go vet both modules, check formatting and the import rules of DESIGN.md, lint .github/workflows with actionlint and the alert rules with promtool
	go vet ./...
	$(GO_TEST) -run '^TestImportRules$$' .
	cd e2e && go vet ./...
	cd e2e/build/k8s && go mod verify >/dev/null
	cd e2e/build/k8s-1.32 && go mod verify >/dev/null
	cd e2e/build/k8s-1.37 && go mod verify >/dev/null
	cd e2e/build/karpenter && go mod verify >/dev/null
	cd e2e/build/containerd && go mod verify >/dev/null
	cd e2e/build/coredns && go mod verify >/dev/null
	cd e2e/build/flannel && go mod verify >/dev/null
	cd e2e/build/kube-router && go mod verify >/dev/null
	cd e2e/build/tools/helm && go mod verify >/dev/null
	helm="$$(scripts/build-tools.sh helm)/helm" && $$helm lint --strict charts/nodeready && \
		$$helm lint --strict charts/nodeready $(CHART_SWITCHES)
	cd e2e/build/tools/promtool && go mod verify >/dev/null
	cd e2e/build/tools/prometheus && go mod verify >/dev/null
	mkdir -p .cache && cd e2e && go run ./cmd/rulesfile ../manifests/monitoring/prometheusrule.yaml >$(CURDIR)/.cache/prometheusrule-groups.yaml
	"$$(scripts/build-tools.sh promtool)/promtool" check rules .cache/prometheusrule-groups.yaml
	@# Not `tee /dev/stderr`: tee truncates a log file that stderr is redirected to.
	@unformatted="$$(gofmt -l .)"; if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted" >&2; exit 1; fi
	scripts/lint-shell.sh

# The chart's optional parts, all on: make vet lints the chart with them too.
CHART_SWITCHES := --set gates.daemonSets.enabled=true --set gates.csi.enabled=true --set gates.dra.enabled=true \
	--set networkPolicyCanary.enabled=true \
	--set replaceNode.enabled=true --set startupTaintPolicy.enabled=true --set labelToTaintPolicy.enabled=true \
	--set podMonitor.enabled=true --set alerts.enabled=true --set grafanaDashboard.enabled=true

.PHONY: tools
tools: ## Build the test-only tools the e2e tests run (Helm, Prometheus) from the Go module proxy into .cache/tools
	scripts/build-tools.sh helm prometheus >/dev/null

.PHONY: control-plane
control-plane: control-plane-current ## Build etcd and the Kubernetes components (v1.36.3 from e2e/build/k8s/go.mod; v1.32.5, the oldest supported, from e2e/build/k8s-1.32/go.mod; the API server of v1.37.2, the newest, from e2e/build/k8s-1.37/go.mod) from the Go module proxy, once per machine
	scripts/build-control-plane.sh e2e/build/k8s-1.32
	scripts/build-control-plane.sh e2e/build/k8s-1.37

# Only v1.36.3: what the demo, the bench and the real node run. make e2e-versions needs all three,
# TestOldestRelease (e2e/suites/admission) and TestDRAGateOnV1beta1 (e2e/suites/gates) v1.32.5.
.PHONY: control-plane-current
control-plane-current:
	scripts/build-control-plane.sh

.PHONY: karpenter
karpenter: ## Build Karpenter with its kwok provider (from e2e/build/karpenter/go.mod) from the Go module proxy, once per machine
	scripts/build-karpenter.sh

# Three lanes side by side, each one e2e package at a time (-p 1): the packages on real nodes
# (datapath and verify, which take the machine's one real-node lock in turn), after building
# what real nodes run; the packages that need no cluster of simulated nodes but the release's
# and the chart's (cmd, framework, static), then security; and every other package on
# simulated nodes, then the version matrix. Each package starts its own control plane and
# agents; no test asserts a duration (the benchmarks measure speed), and a suite waits on its
# controllers far more than it computes (about a third of two cores), so three at once only
# shorten the wall time. A failing lane lets the others finish, and every lane's output stays
# in the log.
#
# Each lane builds what its next packages need just before them, and a fourth job builds
# Karpenter and the version matrix's control planes meanwhile: on a cold cache those builds
# share the CPU with the first suites instead of delaying them all. The static lane first
# compiles what make release compiles (e2e-release-compile), while the other lanes build Helm,
# which it would otherwise wait for. Whatever the fourth job builds last still ends a fresh run:
# e2e-versions' suites on it then run alone on a mostly idle machine. Not at a lower priority: a
# lane that needs one of them before it is done waits on its build lock (scripts/lib/build.sh),
# and a starved build would keep it waiting while the other lanes run. A failed build fails
# the lane that needs it too.
# TestOldestRelease (admission), TestClusterFaultsNeverReplace (failure) and
# TestDRAGateOnV1beta1 (gates) start a v1.32.5 control plane: the simulated lane runs them last,
# when the prebuild has had the most time to build it. A test that asks for a release builds it
# itself when it is not yet built (e2e/framework, controlplane.Build), so this order only saves
# waiting.
E2E_FLOOR_PKGS := ./suites/admission/ ./suites/failure/ ./suites/gates/
e2e_go_test = cd e2e && NODEREADY_BIN=$(CURDIR)/bin/nodeready NODEREADY_PLUGIN_BIN=$(CURDIR)/bin/kubectl-nodeready $(GO_TEST) -p 1 -timeout $(E2E_TIMEOUT)

.PHONY: e2e
e2e: build plugin control-plane-current e2e-node ## End-to-end tests on a real etcd, kube-apiserver, controller manager and scheduler, the real Karpenter and (as root on Linux) real nodes; then e2e-versions
	$(MAKE) --no-print-directory -j4 e2e-real-lane e2e-static-lane e2e-simulated-lane e2e-prebuild

.PHONY: e2e-prebuild
e2e-prebuild:
	scripts/build-karpenter.sh >/dev/null
	scripts/build-control-plane.sh e2e/build/k8s-1.32 >/dev/null
	scripts/build-control-plane.sh e2e/build/k8s-1.37 >/dev/null

# What make release compiles, the agent for PLATFORMS and the plugin for PLUGIN_PLATFORMS, into
# Go's build cache only (the flags that reach the compiler are the release's; ldflags only link).
# Two lanes run make release about the same time, static/release and the release's install in
# suites/verify, and Go does not share a compile under way between two builds: with empty caches
# each compiled it all, about 950 CPU-s twice. The static lane compiles it first, before its own
# make release, and it is done before suites/verify's too (a fresh run: suites/verify used as
# much CPU as with warm caches but Karpenter's build).
.PHONY: e2e-release-compile
e2e-release-compile:
	@for p in $(subst $(comma), ,$(PLATFORMS)); do \
		GOOS=$${p%/*} GOARCH=$${p#*/} go build -trimpath -o /dev/null . || exit 1; \
	done
	@for p in $(subst $(comma), ,$(PLUGIN_PLATFORMS)); do \
		GOOS=$${p%/*} GOARCH=$${p#*/} go build -trimpath -o /dev/null ./cmd/kubectl-nodeready || exit 1; \
	done

# A failed step does not stop its lane: the next ones run, and the lane fails at its end. Each
# step ends with a line of its wall and CPU time (scripts/timed.sh), as each build does.
lane = rc=0; for t in $(1); do scripts/timed.sh "make $$t" $(MAKE) --no-print-directory $$t || rc=1; done; exit $$rc
# What real nodes run (as root on Linux), built before the lanes start and alone: the real-node
# lane's suites are the longest chain of make e2e (about 30 min, most of it waiting on real
# nodes), and built inside that lane beside every other build, the node's compiles put about
# another half hour on that chain with empty Go caches. kube-router is the NetworkPolicy engine
# of TestNetworkPolicyEngine (suites/datapath).
.PHONY: e2e-node
e2e-node:
	@if [ "$$(uname)" = Linux ] && [ "$$(id -u)" = 0 ]; then scripts/build-node.sh >/dev/null && scripts/build-node.sh --kube-router >/dev/null; fi

.PHONY: e2e-real-lane
e2e-real-lane: e2e-node
	+$(call lane,e2e-datapath e2e-verify)

.PHONY: e2e-static-lane
e2e-static-lane:
	+$(call lane,e2e-release-compile e2e-static)

.PHONY: e2e-simulated-lane
e2e-simulated-lane:
	+$(call lane,e2e-simulated e2e-floor e2e-versions)

.PHONY: e2e-datapath
e2e-datapath:
	$(e2e_go_test) ./suites/datapath/

# Karpenter's scenarios, and the chart and the release installed with helm.
.PHONY: e2e-verify
e2e-verify:
	scripts/build-karpenter.sh >/dev/null
	scripts/build-tools.sh helm prometheus >/dev/null
	$(e2e_go_test) ./suites/verify/

# make release twice (static/release), the chart and the image; then the forbidden writes.
E2E_STATIC_PKGS := ./cmd/... ./framework/... ./static/... ./suites/security/
.PHONY: e2e-static
e2e-static:
	scripts/build-tools.sh helm >/dev/null
	$(e2e_go_test) $(E2E_STATIC_PKGS)

# Every package no other lane runs.
.PHONY: e2e-simulated
e2e-simulated:
	scripts/build-tools.sh helm prometheus >/dev/null
	$(e2e_go_test) $$(go list ./... | grep -v -e /cmd/ -e /framework -e /static/ -e /suites/security -e /suites/datapath -e /suites/verify -e /suites/admission -e /suites/failure -e /suites/gates)

.PHONY: e2e-floor
e2e-floor:
	scripts/build-control-plane.sh e2e/build/k8s-1.32 >/dev/null
	$(e2e_go_test) $(E2E_FLOOR_PKGS)

# The version matrix. make e2e runs every suite on v1.36.3; e2e-versions runs the core suites
# again, the same tests, on the newest release and on the oldest supported minor:
# NODEREADY_E2E_KUBERNETES chooses the release of every control plane the suites start
# (e2e/framework/controlplane). What differs on 1.32 is TestOldestRelease (e2e/suites/admission)
# and TestDRAGateOnV1beta1 (e2e/suites/gates), run by make e2e.
E2E_NEWEST := v1.37.2
E2E_OLDEST := v1.32.5
E2E_VERSIONS_CORE := -run '^TestNodeReady$$' -skip '^TestNodeReady$$/^finishes_verification_after_an_API_server_restart$$'
e2e_on = cd e2e && NODEREADY_E2E_KUBERNETES=$(1) NODEREADY_BIN=$(CURDIR)/bin/nodeready NODEREADY_PLUGIN_BIN=$(CURDIR)/bin/kubectl-nodeready $(GO_TEST) -p 1 -timeout $(E2E_TIMEOUT)

.PHONY: e2e-versions
e2e-versions: build plugin control-plane-current ## The core e2e suites on Kubernetes v1.37.2 and v1.32.5 (part of make e2e)
	@# The two releases side by side: a suite waits on its controllers far more than it
	@# computes (about a third of two cores), so two at once take little longer than one.
	@# Each half builds only its own release, so v1.32.5's suites need not wait for v1.37.2's build.
	+$(call side_by_side,e2e-versions-newest,e2e-versions-oldest)

# On every release: the core scenarios (install, verify, re-verify, a failing check, a bad
# setting, the own-node policy, the kubectl plugin) and replace-node. Not the API server restart:
# what it proves is the agent's, its outage is half the suite's time, and the matrix has a budget.
.PHONY: e2e-versions-newest
e2e-versions-newest:
	scripts/build-control-plane.sh e2e/build/k8s-1.37 >/dev/null
	$(call e2e_on,$(E2E_NEWEST)) $(E2E_VERSIONS_CORE) ./suites/verify/
	$(call e2e_on,$(E2E_NEWEST)) -run '^TestFailure$$/^replace-node$$' ./suites/failure/
	@# The taint-at-creation and label-to-taint policies, and the dra gate on resource.k8s.io/v1.
	$(call e2e_on,$(E2E_NEWEST)) -run '^(TestStartupTaintPolicy|TestLabelToTaintPolicy|TestLabelToTaintRules)$$' ./suites/admission/
	$(call e2e_on,$(E2E_NEWEST)) -run '^TestGates$$/^dra:' ./suites/gates/
	@# The release's one round trip rests on how the API server applies a patch of the node.
	$(call e2e_on,$(E2E_NEWEST)) -run '^TestReleaseTestsItsCondition$$' ./suites/reliability/

# Not on 1.32: suites/admission, as 1.32 serves no MutatingAdmissionPolicy v1 (kubectl refuses
# the policies: TestOldestRelease), and the dra gate of suites/gates, as 1.32 serves no
# resource.k8s.io unless DRA is turned on (held: TestOldestRelease; v1beta1: TestDRAGateOnV1beta1).
.PHONY: e2e-versions-oldest
e2e-versions-oldest:
	scripts/build-control-plane.sh e2e/build/k8s-1.32 >/dev/null
	$(call e2e_on,$(E2E_OLDEST)) $(E2E_VERSIONS_CORE) ./suites/verify/
	$(call e2e_on,$(E2E_OLDEST)) -run '^TestFailure$$/^replace-node$$' ./suites/failure/
	$(call e2e_on,$(E2E_OLDEST)) -run '^TestReleaseTestsItsCondition$$' ./suites/reliability/

.PHONY: node
node: ## Build what the real node runs (kubelet, kube-proxy, containerd, CoreDNS, kube-router); installs runc, CNI plugins, iptables, conntrack, ipset from Debian when missing
	scripts/build-node.sh >/dev/null
	scripts/build-node.sh --kube-router >/dev/null

# One real node runs on a machine at a time (e2e/framework/realnode waits for the one before it).
.PHONY: e2e-realnode
e2e-realnode: build control-plane-current node ## Only the end-to-end tests on a real node: kubelet, containerd, runc, kube-proxy, CoreDNS (Linux, root)
	@# 30m: its last scenario runs make release, which cross-compiles seven binaries on a cold cache.
	cd e2e && NODEREADY_BIN=$(CURDIR)/bin/nodeready $(GO_TEST) -timeout 30m -v -run '^TestRealNode$$' ./suites/verify/

.PHONY: e2e-multinode
e2e-multinode: build control-plane-current node ## Only the end-to-end tests on clusters of two to four real nodes networked by flannel (VXLAN), the podnetwork check (Linux, root)
	cd e2e && NODEREADY_BIN=$(CURDIR)/bin/nodeready $(GO_TEST) -timeout 20m -v ./suites/datapath/

.PHONY: demo
# The demo builds what real nodes run (scripts/build-node.sh) itself, beside the simulated fleet.
demo: build ## Watch nodeready verify this machine (--dry-run, at once), then autoscaled nodes on a local control plane built from source (no cluster needed), then real nodes joining a cluster (as root on Linux); each ends with kubectl nodeready status
	@printf '\nThis machine as the agent judges it, no cluster needed (outside a cluster the\ncluster DNS name does not resolve and the API server checks are skipped):\n\n$$ nodeready --dry-run\n'
	@bin/nodeready --dry-run || true
	@printf '\nThen a fleet of nodes on a local control plane.\n\n'
	@$(MAKE) --no-print-directory plugin
	cd e2e && NODEREADY_BIN=$(CURDIR)/bin/nodeready NODEREADY_PLUGIN_BIN=$(CURDIR)/bin/kubectl-nodeready go run ./cmd/demo $(DEMO_FLAGS)

.PHONY: bench
bench: build control-plane-current ## Measure overhead, latency on a network of 200 ms round trips, concurrency, scale, what the admission policies and a fault shared by 1000 joining nodes cost the API server, footprint and (as root on Linux) real nodes' critical path; writes BENCH.md
	@if [ "$$(uname)" = Linux ] && [ "$$(id -u)" = 0 ]; then scripts/build-node.sh >/dev/null; \
		else scripts/build-node.sh --coredns >/dev/null; fi
	cd e2e && NODEREADY_BIN=$(CURDIR)/bin/nodeready go run ./cmd/bench -out $(CURDIR)/BENCH.md $(BENCH_FLAGS)

# The image is built by e2e/cmd/image, the same code the real-node tests run: no Docker engine,
# one static binary per platform in the Dockerfile's runtime layout, pushed with the
# credentials of ~/.docker/config.json (docker login, or any tool that writes it).
comma := ,
empty :=
space := $(empty) $(empty)
IMAGE_BINARIES = $(subst $(space),$(comma),$(foreach p,$(subst $(comma), ,$(PLATFORMS)),$(p)=$(CURDIR)/bin/$(subst /,_,$(p))/nodeready))
IMAGE_FLAGS    = -binary $(IMAGE_BINARIES) -version $(VERSION) -revision $(REVISION)

.PHONY: image-binaries
image-binaries:
	@for p in $(subst $(comma), ,$(PLATFORMS)); do \
		echo "go build $$p"; \
		GOOS=$${p%/*} GOARCH=$${p#*/} go build -trimpath -ldflags "$(LDFLAGS)" -o bin/$${p%/*}_$${p#*/}/nodeready . || exit 1; \
	done

.PHONY: image
image: image-binaries ## Build the multi-arch image (no Docker engine needed) and push it to IMAGE; its digest goes to bin/image.digest
	cd e2e && go run ./cmd/image $(IMAGE_FLAGS) -push $(IMAGE) -digest-file $(CURDIR)/bin/image.digest

.PHONY: image-oci
image-oci: image-binaries ## Build the multi-arch image into the OCI layout bin/image-oci, without a registry
	rm -rf bin/image-oci
	cd e2e && go run ./cmd/image $(IMAGE_FLAGS) -oci $(CURDIR)/bin/image-oci -digest-file $(CURDIR)/bin/image.digest

# The release: every artefact of VERSION in DIST, the one command the release workflow runs and
# a fork can run too. REGISTRY is where the release lives, ghcr.io/nodeready unless given; the
# image is REGISTRY/nodeready and the chart oci://REGISTRY/charts/nodeready, and the manifests
# and the chart name the image by digest there. Given REGISTRY, the image and the chart are
# pushed to it as well (docker login or helm registry login first; HELM_PUSH_FLAGS=--plain-http
# for a local registry). The files' times are the commit's (SOURCE_DATE_EPOCH), so two builds of
# one commit give the same bytes and the same image digest.
DIST              ?= $(CURDIR)/dist
REGISTRY          ?=
RELEASE_REGISTRY   = $(or $(REGISTRY),ghcr.io/nodeready)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
HELM              ?= $$(scripts/build-tools.sh helm)/helm
HELM_PUSH_FLAGS   ?=
IMAGE_PUSH_FLAGS  ?=
CHART_VERSION      = $(patsubst v%,%,$(VERSION))

.PHONY: release
release: image-binaries plugin-release ## Build the release of VERSION into dist/: image (OCI layout, linux/amd64+arm64), SBOM, chart, install.yaml pinned to the image's digest, the plugin's archives and krew manifest, SHA256SUMS; with REGISTRY=ghcr.io/you, push the image and the chart there
	rm -rf $(DIST) && mkdir -p $(DIST)
	cd e2e && go run ./cmd/image $(IMAGE_FLAGS) -oci $(DIST)/image-oci -digest-file $(DIST)/image.digest \
		$(if $(REGISTRY),-push $(REGISTRY)/nodeready:$(VERSION) $(IMAGE_PUSH_FLAGS))
	cd e2e && go run ./cmd/sbom -version $(VERSION) -created $(SOURCE_DATE_EPOCH) -out $(DIST)/nodeready.spdx.json \
		$(foreach p,$(subst $(comma), ,$(PLATFORMS)),$(p)=$(CURDIR)/bin/$(subst /,_,$(p))/nodeready)
	image="$(RELEASE_REGISTRY)/nodeready@$$(cat $(DIST)/image.digest)" && cd e2e && \
		go run ./cmd/release manifests -image "$$image" -out $(DIST)/install.yaml ../manifests && \
		go run ./cmd/release chart -image "$$image" -created $(SOURCE_DATE_EPOCH) -out $(DIST)/.chart ../charts/nodeready
	$(HELM) package $(DIST)/.chart/nodeready --version $(CHART_VERSION) --app-version $(VERSION) --destination $(DIST)
	rm -rf $(DIST)/.chart
	cp bin/plugin/* $(DIST)/
	cd e2e && go run ./cmd/release sums $(DIST)
	$(if $(REGISTRY),$(HELM) push $(DIST)/nodeready-$(CHART_VERSION).tgz oci://$(REGISTRY)/charts $(HELM_PUSH_FLAGS))
	@echo "release $(VERSION): $(RELEASE_REGISTRY)/nodeready@$$(cat $(DIST)/image.digest), files in $(DIST)"

.PHONY: deploy
deploy: ## Install into the current kubectl context, with IMAGE as the agent image
	kubectl apply -f manifests/
	kubectl -n kube-system set image daemonset/nodeready nodeready=$(IMAGE)

.PHONY: clean
clean: ## Remove build output (keeps the control-plane cache; rm -rf .cache for that)
	rm -rf bin dist
