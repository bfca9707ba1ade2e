// The mixin's dashboard lint, pinned and built with
// `go -C tools/dashlint tool -n dashlint` (mixin/mixin_test.go,
// `make lint-mixin`): every dashboard decoded strictly against Grafana's
// dashboard schema, as the Grafana Foundation SDK's generated types hold it,
// and validated by them. Its main package is ours (main.go): neither
// Grafana's dashboard-linter nor mixtool is served by the Go module proxy.
module github.com/infer-exporter/infer_exporter/tools/dashlint

go 1.26.8

tool github.com/infer-exporter/infer_exporter/tools/dashlint

require github.com/grafana/grafana-foundation-sdk/go v0.0.22
