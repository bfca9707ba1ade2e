# The README's two commands are `go run ./cmd/infer_exporter --demo` (also
# `make demo`) and `make test`.
GO ?= go
BIN := infer_exporter
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/prometheus/common/version.Version=$(VERSION) \
	-X github.com/prometheus/common/version.Revision=$(REVISION) \
	-X github.com/prometheus/common/version.Branch=main

# The pinned real components of the end-to-end test and the mixin's build
# (tools/*/go.mod): run through `go tool`, built once into Go's cache.
PROMTOOL := $(GO) tool -modfile=tools/prometheus/go.mod promtool
JSONNET := $(GO) tool -modfile=tools/prometheus/go.mod jsonnet

.PHONY: build demo test test-race test-timing test-e2e tools mixin bench lint lint-mixin

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/infer_exporter

demo:
	$(GO) run ./cmd/infer_exporter --demo

# Every test: the whole tree under the race detector (the mixin's promtool
# tests included), then the timing-accuracy tests, which compare measured
# latencies with the simulator's ground truth and so run without the race
# detector's slowdown (they skip under -race), then the end-to-end test with
# a real Prometheus and Alertmanager (also without -race, and alone, so that
# its latencies are the simulator's, not a loaded CPU's). `tools` builds the
# pinned tools first: 630 s on 2 idle cores when Go's build cache is cold
# (measured; seconds after).
test: lint tools lint-mixin test-race test-timing test-e2e

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build ./...

test-race:
	$(GO) test -race -count=1 -timeout 20m ./...

# One package at a time (-p 1), so that no other test competes for the CPU
# while latencies are compared with the ground truth.
test-timing:
	$(GO) test -p 1 -count=1 -run 'Accuracy' -timeout 10m ./...

test-e2e:
	$(GO) test -count=1 -run 'EndToEnd' -timeout 20m -v ./e2e/

# The pinned tools, built in parallel groups (one per module): most of a cold
# build is spent where a group uses one core (a big link, and Ollama's C++,
# whose files cgo compiles one after another), so the groups overlap there.
# Ollama and the control plane, the two slowest, start first.
TOOL_GROUPS := tool-ollama tool-kube tool-prometheus tool-alertmanager tool-otelcol tool-deploy schema-modules
.PHONY: $(TOOL_GROUPS)

tools:
	$(MAKE) --no-print-directory -j4 $(TOOL_GROUPS)

# The real inference engine of the Ollama end-to-end test: Ollama with its
# bundled llama.cpp (C++, through cgo: needs g++), a module of its own
# (tools/ollama/go.mod says why v0.11.4), built with the environment of
# tools/ollama/build.env (-O1 for the C++; the tests read the same file).
# Cold, with Go's default -O2 -g, it took 530 s user and 51 s system CPU,
# measured with
# `GOCACHE=$(mktemp -d) /usr/bin/time -v go -C tools/ollama build -o /tmp/ollama github.com/ollama/ollama`.
tool-ollama:
	env $$(sed -e 's/^[[:space:]]*//' -e '/^#/d' tools/ollama/build.env) $(GO) -C tools/ollama tool -n ollama >/dev/null

# The control plane of e2e/controlplane_test.go: our main over kube-apiserver,
# four controllers of kube-controller-manager and an embedded etcd
# (k8s.io/kubernetes v1.35.4, the schemas' release), a module of its own.
# 280 s user and 69 s system CPU, 589 s of wall time, inside a cold
# `make tools` on 2 idle cores (docs/deploy.md says how it was measured).
tool-kube:
	$(GO) -C tools/kube tool -n kube >/dev/null

tool-prometheus:
	$(GO) tool -modfile=tools/prometheus/go.mod -n prometheus >/dev/null
	$(GO) tool -modfile=tools/prometheus/go.mod -n promtool >/dev/null
	$(GO) tool -modfile=tools/prometheus/go.mod -n jsonnet >/dev/null

tool-alertmanager:
	$(GO) tool -modfile=tools/alertmanager/go.mod -n alertmanager >/dev/null

# The OpenTelemetry Collector of the OTLP end-to-end test: a module whose
# main package is ours (tools/otelcol/main.go), so it runs from its own
# directory (2.5 minutes on 2 cores when Go's build cache is cold).
tool-otelcol:
	$(GO) -C tools/otelcol tool -n otelcol >/dev/null

# The checks of deploy/ and of the mixin's dashboards: kubeconform,
# kustomize, the Pod Security Standards check (our main over
# k8s.io/pod-security-admission, e2e/podsecurity_test.go) and the dashboard
# lint (Grafana's dashboard schema, tools/dashlint).
tool-deploy:
	$(GO) tool -modfile=tools/kubeconform/go.mod -n kubeconform >/dev/null
	$(GO) tool -modfile=tools/kustomize/go.mod -n kustomize >/dev/null
	$(GO) -C tools/podsecurity tool -n podsecurity >/dev/null
	$(GO) -C tools/dashlint tool -n dashlint >/dev/null

# The modules that kubeconform's schemas are converted from, into Go's module
# cache (18 MB and 5 MB of zips; e2e/kubeconform_test.go checks their hashes).
schema-modules:
	$(GO) mod download $$(awk '!/^#/ && NF {print $$1 "@" $$2}' tools/kubeconform/schema-modules.txt)

# Regenerate the mixin's committed outputs (a test fails when they are stale).
mixin:
	rm -rf mixin/generated
	$(JSONNET) -c -m mixin/generated -S mixin/build.jsonnet >/dev/null
	$(JSONNET) -S mixin/prometheusrule.jsonnet > deploy/kubernetes/prometheusrule.yaml
	$(PROMTOOL) check rules mixin/generated/rules.yaml mixin/generated/alerts.yaml

# The real linters over the rendered mixin (also a test, mixin.TestLint):
# promtool's every lint check over the rules and alerts, and Grafana's
# dashboard schema over the dashboards (tools/dashlint: dashboard-linter
# and mixtool are not served by the Go module proxy).
lint-mixin:
	$(PROMTOOL) check rules --lint=all --lint-fatal mixin/generated/rules.yaml mixin/generated/alerts.yaml
	$(GO) -C tools/dashlint tool dashlint $(abspath $(wildcard mixin/generated/dashboards/*.json))

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
