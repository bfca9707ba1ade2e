// Command dashlint checks Grafana dashboards against Grafana's own schema:
// the dashboard kind of the Grafana Foundation SDK (Apache-2.0), decoded
// strictly, with the default panel and data source plugins registered, so
// that an unknown or mistyped field of the dashboard, of a panel's options or
// field config, or of a Prometheus query is refused, then the SDK's
// validation of the decoded dashboard. It is the mixin's dashboard lint
// (`make lint-mixin`); its own module keeps the SDK out of the exporter's
// go.mod, like tools/podsecurity.
//
// Usage: dashlint FILE.json...; it prints one line per problem, FILE: reason,
// and exits 1 when there is any.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: dashlint FILE.json...")
		os.Exit(2)
	}
	// The panel types' options and field configs and the data sources'
	// queries are decoded by their own types only once registered; without
	// this they would be accepted as any JSON.
	plugins.RegisterDefaultPlugins()
	failed := false
	for _, f := range os.Args[1:] {
		for _, err := range check(f) {
			failed = true
			fmt.Printf("%s: %v\n", f, err)
		}
	}
	if failed {
		os.Exit(1)
	}
}

// check returns the problems of one dashboard file, each of the SDK's
// errors on its own.
func check(path string) []error {
	b, err := os.ReadFile(path)
	if err != nil {
		return []error{err}
	}
	var d dashboard.Dashboard
	if err := d.UnmarshalJSONStrict(b); err != nil {
		return unwrap(err)
	}
	if err := d.Validate(); err != nil {
		return unwrap(err)
	}
	return nil
}

// unwrap splits the SDK's build errors, one per field; the SDK returns an
// empty list of them, not nil, for a dashboard with no problem.
func unwrap(err error) []error {
	var fields cog.BuildErrors
	if errors.As(err, &fields) {
		out := make([]error, len(fields))
		for i, f := range fields {
			out[i] = f
		}
		return out
	}
	return []error{err}
}
