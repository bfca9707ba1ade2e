# The README's two commands are `make demo` (`go run ./cmd/infer_exporter
# --demo`, quieter) and `make test`.
GO ?= go
# bash with pipefail: the steps that run side by side prefix their lines
# through sed, and a failure must still fail the step.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c

# go-nvml's cgo preamble calls NVML functions that nvml.h marks deprecated,
# so the first build of the collector prints some 150 lines of gcc
# warnings about code that is not ours. Go's default C flags (-O2 -g) plus
# -Wno-deprecated-declarations keep them out. Exported to every target, so
# that builds, tests and the pinned tools agree: cgo's flags are part of
# Go's cache key (only the cgo packages, runtime/cgo, net, os/user and
# go-nvml, compile again under other flags: their output is the same, so
# what imports them stays cached). Ollama's build.env sets its own.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
BIN := infer_exporter
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/prometheus/common/version.Version=$(VERSION) \
	-X github.com/prometheus/common/version.Revision=$(REVISION) \
	-X github.com/prometheus/common/version.Branch=main

# The pinned real components of the end-to-end test and the mixin's build
# (tools/*/go.mod), built once into Go's cache with their module's build.env
# (tools/buildenv.sh; build flags, which `go tool` does not take): `go run
# -exec echo PACKAGE` builds one and prints its path instead of running it,
# as internal/realstack's Tool and ModuleTool do.
# $(call tool-run,DIR,PACKAGE): DIR's module (tools/prometheus, ...), run
# from the repository's root with -modfile when DIR has no main package of
# its own, else from DIR.
tool-run = tools/buildenv.sh $(1) $(GO) run -modfile=$(1)/go.mod $(2)
module-run = tools/buildenv.sh $(1) $(GO) -C $(1) run $(2)
PROMTOOL := $(call tool-run,tools/prometheus,github.com/prometheus/prometheus/cmd/promtool)
JSONNET := $(call tool-run,tools/prometheus,github.com/google/go-jsonnet/cmd/jsonnet)

.PHONY: build chart demo quick test test-race-tools tools-niced test-slow-e2e test-race test-slow test-timing test-e2e test-e2e-alerts test-e2e-stacks tools mixin chart-readme bench lint lint-mixin

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/infer_exporter

# The README's first command: the modules first, quietly (go build would
# print a "go: downloading" line for each of some 50), then the demo, built
# as make build builds it (the version stamped) and run as itself, not
# through go run: go run exits 1 when Ctrl-C stops it, and make would end
# the demo with "Error 1"; the exporter stops on Ctrl-C with status 0.
demo:
	@echo "make demo: downloading modules, then building and starting the demo (a few minutes the first time); then open http://localhost:9750/ (Ctrl-C stops it)"
	@$(GO) mod download
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/infer_exporter
	./$(BIN) --demo

# The inner loop: every test that needs neither a pinned tool nor a quiet
# machine (go test -short; internal/testenv says what skips and why). It
# passes beside other work on the machine.
quick:
	bash internal/testenv/split.sh $(BENCH_SPLIT) ./bench/ $(GO) -short -count=1 -- ./...

# Every test, in the order that fails fastest: lint; the pinned tools' build
# beside the race step (which needs no tool); the mixin's linters; the slow
# step beside the end-to-end tests (each passes beside a busy machine, and
# each mostly waits: on real time, on promtool, on Prometheus's rules and
# Alertmanager); the timing-accuracy tests last and alone, on a machine
# with nothing else to do.
test: lint test-race-tools lint-mixin test-slow-e2e test-timing

# The pinned tools' build (make tools) beside the race step, lines prefixed
# tools: and race:. The build runs at the lowest CPU priority (nice 19), so
# the race step's tests get the CPU as soon as they ask for it, as beside no
# build, and the build takes what they leave: cold, the tools are most of a
# run and the race step waits on real time for much of its own. At the
# same priority, in an earlier try, four tool groups' compiles beside
# the race step (a load average of 15 to 19 on 2 cores) failed five of its
# tests that pass beside two busy loops. Warm, the build is seconds.
test-race-tools:
	@echo "make tools (at nice 19) and make test-race, side by side: their lines start tools: and race:"
	@$(call side-by-side,-j2 tools-niced test-race)

tools-niced:
	nice -n 19 $(MAKE) --no-print-directory tools $(call prefix,tools)

# The slow step and the end-to-end tests' two processes at once, lines
# prefixed slow:, alerts: and stacks:.
test-slow-e2e:
	@echo "make test-slow and make test-e2e, side by side: their lines start slow:, alerts: and stacks:"
	@$(call side-by-side,-j3 test-slow test-e2e-alerts test-e2e-stacks)

# A go test command of a step: when it fails, its output ends with a short
# summary of what failed (the failed tests and packages, a panic's first
# lines: internal/testenv/gotest.sh), so that the last lines of a log name
# them. $(call gotest,TARGET) COMMAND.
gotest = internal/testenv/gotest.sh $(1)

# $(call side-by-side,-jN TARGETS): the targets at once, lines prefixed;
# when one fails, the failed steps' summaries again at the end, after the
# other steps' last lines (a cold tools build goes on for minutes after
# the race step).
side-by-side = failures=$$(mktemp) && trap 'rm -f "$$failures"' EXIT && \
	{ $(MAKE) --no-print-directory $(1) STEP_PREFIX=1 FAILURES="$$failures"; status=$$?; } && \
	if [ -s "$$failures" ]; then echo "what failed:"; cat "$$failures"; fi && exit $$status

# sed -u: a line as soon as it is written, not at the end of the step (make's
# --output-sync would hold a step's whole output until it ends); each line
# is one write, so the two steps' lines interleave whole.
prefix = $(if $(STEP_PREFIX),2>&1 | sed -u 's/^/$(1): /')

# The build without cgo takes most pinned tools' flags (tools/*/build.env: no
# optimisation, inlining or DWARF, no cgo), which change nothing of whether it
# compiles: cold, it then shares their standard library in Go's cache.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build -gcflags='all=-N -l -dwarf=false' ./...

# The bench package's tests, in the race and slow steps, in this many
# processes beside the other packages' run (internal/testenv/split.sh says
# why): most of them wait on real time, and in one process they were each
# step's last by minutes.
BENCH_SPLIT ?= 3

# The race detector over every test of `make quick`: our code's concurrency.
# Four packages at a time (-p 4; go test's default is the number of cores,
# 2 here): most of these packages wait on real time more than they
# compute (bench: 23 s of CPU in 80 s), and with two at a time the
# machine stood half idle. 181 s alone with -p 2, 139 s with -p 4, for
# some 15% more CPU (the tests beside each other); it passes beside two
# busy loops too.
test-race:
	$(call gotest,test-race) bash internal/testenv/split.sh $(BENCH_SPLIT) ./bench/ $(GO) -race -short -count=1 -p 4 -timeout 20m -- ./... $(call prefix,race)

# What -short leaves out, less the timing and end-to-end tests: the suites
# that run a pinned tool (the mixin's promtool and jsonnet, kubeconform, Pod
# Security, chromium) and the bench's and replays' runs in real time, whose
# verdicts do not depend on the machine's speed. Without the race detector,
# which checks nothing of ours in a child process; only the packages that
# hold such tests (those that call testenv.Slow or a realstack tool).
SLOW_PKGS = $(sort $(dir $(shell git grep -l -E 'testenv\.Slow|realstack\.(Tool|ModuleTool|BuildExporter|Chromium)' -- '*_test.go' ':!internal/testenv' ':!internal/realstack')))
test-slow:
	$(call gotest,test-slow) bash internal/testenv/split.sh $(BENCH_SPLIT) ./bench/ $(GO) -count=1 -skip 'Accuracy|EndToEnd' -timeout 20m -- $(addprefix ./,$(SLOW_PKGS)) $(call prefix,slow)

# The timing-accuracy tests (named ...Accuracy..., testenv.Timing), which
# compare measured latencies with the simulator's ground truth: each in a
# process of its own, so that none inherits another's heap and goroutines,
# three at a time (they mostly wait: 0.1 of a core one at a time), without
# the race detector and with no other step running; each package's test
# binary built once (go test -c), only for the packages that hold one (git
# grep). A failed one runs again alone, up to 3 tries in all, and the last
# line counts the tests that needed a retry (internal/testenv/accuracy.sh
# says why).
test-timing:
	GO="$(GO)" bash internal/testenv/accuracy.sh

# The end-to-end tests with a real Prometheus and Alertmanager, an
# OpenTelemetry Collector, Ollama and the control plane, without the race
# detector, in two processes side by side: TestEndToEnd spends most of its
# two and a half minutes waiting for Prometheus's rules and Alertmanager (a
# 75 s baseline, alerts firing and resolving), then the two OTLP tests
# (25 s) run after it; the other process runs the control plane (30 s),
# TestEndToEndLifecycle (100 s) and Ollama (45 s), in that order. Some
# 170 s and 180 s: with the OTLP tests in the second process it was 210 s.
# Lines prefixed alerts: and stacks:. (TestEndToEndLifecycle in a third
# process, beside Ollama's and the control plane's starts, once saw a
# request end while its target read not ready: it stays where it ran.)
E2E_ALERTS = ^(TestEndToEnd|TestOTLPEndToEnd|TestOTLPDemoEndToEnd)$$
test-e2e:
	@$(call side-by-side,-j2 test-e2e-alerts test-e2e-stacks)

test-e2e-alerts:
	$(call gotest,test-e2e-alerts) $(GO) test -count=1 -run '$(E2E_ALERTS)' -timeout 20m -v ./e2e/ $(call prefix,alerts)

test-e2e-stacks:
	$(call gotest,test-e2e-stacks) $(GO) test -count=1 -run 'EndToEnd' -skip '$(E2E_ALERTS)' -timeout 20m -v ./e2e/ $(call prefix,stacks)

# The pinned tools, built in parallel groups (one per module): most of a cold
# build is spent where a group uses one core (a big link, and Ollama's C++,
# whose files cgo compiles one after another), so the groups overlap there.
# Ollama and the control plane, two of the slowest, start first. Each cold
# build's time, and what each build.env saves: CONTRIBUTING.md.
TOOL_GROUPS := tool-ollama tool-kube tool-prometheus tool-alertmanager tool-otelcol tool-deploy schema-modules
.PHONY: $(TOOL_GROUPS)

tools:
	$(MAKE) --no-print-directory -j4 $(TOOL_GROUPS)

# The real inference engine of the Ollama end-to-end test: Ollama with its
# bundled llama.cpp (C++, through cgo: needs g++), a module of its own
# (tools/ollama/go.mod says why v0.11.4), built with the environment of
# tools/ollama/build.env (-O1 for the C++, and its Go without optimisation;
# the tests read the same file).
tool-ollama:
	$(call module-run,tools/ollama,-exec echo github.com/ollama/ollama) >/dev/null

# The Kubernetes module (tools/kube): the control plane of
# e2e/controlplane_test.go (our main over kube-apiserver, four controllers of
# kube-controller-manager and an embedded etcd; k8s.io/kubernetes v1.35.4,
# the schemas' release), helm v4.1.4 (the chart's checks, e2e/helm_test.go,
# and its admission) and the Pod Security Standards check (our main over
# k8s.io/pod-security-admission, e2e/podsecurity_test.go): one module, so
# that the Kubernetes libraries they share compile once; the largest cold
# build (tools/kube/build.env). One after another: two go commands at once
# would each compile the packages they share.
tool-kube:
	$(call module-run,tools/kube,-exec echo github.com/infer-exporter/infer_exporter/tools/kube) >/dev/null
	$(call module-run,tools/kube,-exec echo helm.sh/helm/v4/cmd/helm) >/dev/null
	$(call module-run,tools/kube,-exec echo github.com/infer-exporter/infer_exporter/tools/kube/podsecurity) >/dev/null

# Prometheus, promtool and jsonnet: `go run -exec echo` builds each into
# Go's cache and prints its path instead of running it, with the build tags
# of tools/prometheus/build.env (no service discovery plugins).
tool-prometheus:
	$(call tool-run,tools/prometheus,-exec echo github.com/prometheus/prometheus/cmd/prometheus) >/dev/null
	$(call tool-run,tools/prometheus,-exec echo github.com/prometheus/prometheus/cmd/promtool) >/dev/null
	$(call tool-run,tools/prometheus,-exec echo github.com/google/go-jsonnet/cmd/jsonnet) >/dev/null

tool-alertmanager:
	$(call tool-run,tools/alertmanager,-exec echo github.com/prometheus/alertmanager/cmd/alertmanager) >/dev/null

# The OpenTelemetry Collector of the OTLP end-to-end test: a module whose
# main package is ours (tools/otelcol/main.go), so it runs from its own
# directory.
tool-otelcol:
	$(call module-run,tools/otelcol,-exec echo github.com/infer-exporter/infer_exporter/tools/otelcol) >/dev/null

# The checks of deploy/ and of the mixin's dashboards: kubeconform,
# kustomize and the dashboard lint (Grafana's dashboard schema,
# tools/dashlint).
tool-deploy:
	$(call tool-run,tools/kubeconform,-exec echo github.com/yannh/kubeconform/cmd/kubeconform) >/dev/null
	$(call tool-run,tools/kustomize,-exec echo sigs.k8s.io/kustomize/kustomize/v5) >/dev/null
	$(call module-run,tools/dashlint,-exec echo github.com/infer-exporter/infer_exporter/tools/dashlint) >/dev/null

# The modules that kubeconform's schemas are converted from, into Go's module
# cache (18 MB and 5 MB of zips; e2e/kubeconform_test.go checks their hashes).
schema-modules:
	$(GO) mod download $$(awk '!/^#/ && NF {print $$1 "@" $$2}' tools/kubeconform/schema-modules.txt)

# Regenerate the mixin's committed outputs (a test fails when they are stale):
# mixin/generated, deploy/kubernetes/prometheusrule.yaml, and the chart's
# copies of the rules, alerts and dashboards (charts/infer-exporter/files/,
# which holds nothing else: a chart reads only files inside its directory).
# It says what it does (the first build of promtool, Prometheus' module, takes
# minutes), and renders and checks into a temporary directory beside
# mixin/generated, which it replaces only then: a failure or a Ctrl-C leaves
# the committed files as they were.
mixin:
	@echo "make mixin: building the pinned jsonnet and promtool (tools/prometheus/go.mod; minutes the first time, seconds after)"
	@$(JSONNET) --version >/dev/null
	@$(PROMTOOL) --version >/dev/null
	@echo "make mixin: rendering and checking into a temporary directory"
	@tmp=$$(mktemp -d mixin/.render.XXXXXX) && trap 'rm -rf "$$tmp"' EXIT INT TERM && \
	$(JSONNET) -c -m "$$tmp/generated" -S mixin/build.jsonnet >/dev/null && \
	$(JSONNET) -S mixin/prometheusrule.jsonnet > "$$tmp/prometheusrule.yaml" && \
	$(PROMTOOL) check rules "$$tmp/generated/rules.yaml" "$$tmp/generated/alerts.yaml" && \
	rm -rf mixin/generated && mv "$$tmp/generated" mixin/generated && \
	mv "$$tmp/prometheusrule.yaml" deploy/kubernetes/prometheusrule.yaml && \
	rm -rf charts/infer-exporter/files && mkdir -p charts/infer-exporter/files && \
	cp -R mixin/generated/rules.yaml mixin/generated/alerts.yaml mixin/generated/dashboards charts/infer-exporter/files/ && \
	echo "make mixin: replaced mixin/generated, deploy/kubernetes/prometheusrule.yaml and charts/infer-exporter/files"

# Lint and render the Helm chart with the pinned helm (v4.1.4, tools/kube),
# built alone, not the whole Kubernetes module: some 3.5 minutes cold on 2
# idle cores (CONTRIBUTING.md's cold builds), seconds once cached. The rendered manifests go to stdout.
chart:
	$(call module-run,tools/kube,helm.sh/helm/v4/cmd/helm) lint $(CURDIR)/charts/infer-exporter
	$(call module-run,tools/kube,helm.sh/helm/v4/cmd/helm) template infer-exporter $(CURDIR)/charts/infer-exporter --namespace inference

# Regenerate the table of values of charts/infer-exporter/README.md from the
# chart's values.yaml comments and values.schema.json (internal/chartdoc, our
# generator; its test fails when the table is stale).
chart-readme:
	$(GO) test -count=1 -run '^TestChartReadme$$' ./internal/chartdoc/ -update

# The real linters over the rendered mixin (also a test, mixin.TestLint):
# promtool's every lint check over the rules and alerts, and Grafana's
# dashboard schema over the dashboards (tools/dashlint: dashboard-linter
# and mixtool are not served by the Go module proxy).
lint-mixin:
	$(PROMTOOL) check rules --lint=all --lint-fatal mixin/generated/rules.yaml mixin/generated/alerts.yaml
	$(call module-run,tools/dashlint,github.com/infer-exporter/infer_exporter/tools/dashlint) $(abspath $(wildcard mixin/generated/dashboards/*.json))

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
