# The README's two commands are `make demo` and `make test`.
GO ?= go
BIN := infer_exporter
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/prometheus/common/version.Version=$(VERSION) \
	-X github.com/prometheus/common/version.Revision=$(REVISION) \
	-X github.com/prometheus/common/version.Branch=main

.PHONY: build demo test test-race test-timing bench lint

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/infer_exporter

demo:
	$(GO) run ./cmd/infer_exporter --demo

# Every test: the whole tree under the race detector, then the timing-accuracy
# tests, which compare measured latencies with the simulator's ground truth
# and so run without the race detector's slowdown (they skip under -race).
test: lint test-race test-timing

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build ./...

test-race:
	$(GO) test -race -count=1 -timeout 20m ./...

test-timing:
	$(GO) test -count=1 -run 'Accuracy' -timeout 10m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
