// Command promqlnames reads PromQL expressions, one JSON string per line on
// stdin, parses each with Prometheus's own parser and writes one JSON object
// per line: the metric names its selectors read, or the parse error. The
// mixin's tests use it to check that every rule and dashboard query reads
// metrics that exist.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

type result struct {
	Expr  string   `json:"expr"`
	Names []string `json:"names,omitempty"`
	Error string   `json:"error,omitempty"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	p := parser.NewParser(parser.Options{})
	for in.Scan() {
		var expr string
		if err := json.Unmarshal(in.Bytes(), &expr); err != nil {
			fmt.Fprintln(os.Stderr, "promqlnames: input line is not a JSON string:", err)
			os.Exit(2)
		}
		res := result{Expr: expr}
		if e, err := p.ParseExpr(expr); err != nil {
			res.Error = err.Error()
		} else {
			res.Names = names(e)
		}
		if err := out.Encode(res); err != nil {
			fmt.Fprintln(os.Stderr, "promqlnames:", err)
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "promqlnames:", err)
		os.Exit(1)
	}
}

// names returns the metric names of every vector and matrix selector of e;
// a selector without a fixed name (only {__name__=~"..."}) is reported as
// its matcher, so that the caller sees it.
func names(e parser.Expr) []string {
	set := map[string]bool{}
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if vs.Name != "" {
			set[vs.Name] = true
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName {
				if m.Type == labels.MatchEqual {
					set[m.Value] = true
				} else {
					set[m.String()] = true
				}
			}
		}
		return nil
	})
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
