package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaShape measures a schema's JSON document before it is compiled:
// its nesting depth (the top-level object is 1) and the values that may
// each be a subschema (objects and booleans). The compiler's work grows
// faster than the document: it finds each subschema it enqueues by a
// linear search of those enqueued before (jsonschema v6.0.3
// compiler.go, queue.get) and validates the document against the
// metaschema building each value's JSON pointer anew, so that a 65 KB
// schema nested 6,500 deep took minutes to load. The walk stops as soon
// as either bound is passed, so its own work is bounded by them.
func schemaShape(doc any) (depth, subschemas int) {
	var walk func(v any, level int)
	walk = func(v any, level int) {
		if depth > MaxSchemaDepth || subschemas > MaxSubschemas {
			return
		}
		switch v := v.(type) {
		case map[string]any:
			subschemas++
			depth = max(depth, level)
			for _, x := range v {
				walk(x, level+1)
			}
		case []any:
			depth = max(depth, level)
			for _, x := range v {
				walk(x, level+1)
			}
		case bool:
			subschemas++
		}
	}
	walk(doc, 1)
	return depth, subschemas
}

// costNode is one subschema as the validator applies it, by index into
// schemaCost's nodes: what it applies to the value it is given, and to
// that value's members.
type costNode struct {
	// same are evaluated on the same value, each of them: $ref, not,
	// allOf, anyOf, oneOf (all of whose members a failing value
	// evaluates), if, dependentSchemas, dependencies.
	same []int
	// either are groups of which one member is evaluated on the same
	// value: then or else; the possible targets of $dynamicRef or
	// $recursiveRef, which the validator picks from its path (their
	// groups' indexes in either, or -1).
	either             [][]int
	dynamic, recursive int
	// A member of an object value is evaluated by its property's schema
	// and every patternProperties (a key may match them all), or else by
	// additionalProperties, or else unevaluatedProperties; its key by
	// propertyNames.
	props, patterns                []int
	additional, unevalProps, names int
	// A member of an array value is evaluated by one of prefixItems (a
	// draft-7 items array), items, additionalItems or unevaluatedItems,
	// and by contains besides.
	prefix                    []int
	items, addItems, unevalIt int
	contains                  int
}

// schemaCost bounds what checking one answer against a compiled schema
// can cost: the evaluations of subschemas that the validator makes at one
// value of an answer nested at most MaxAnswerDepth deep. Each level of an
// answer multiplies the subschemas that reach it when more than one of a
// value's subschemas descends into the same member: the validator really
// evaluates every branch of an anyOf or allOf that recurses, so that
// {"items": {"anyOf": [{"$ref": "#"}, {"$ref": "#"}]}} evaluates 2^k
// subschemas at a value k deep, and took 9 s and 1.5 GB for an answer 18
// deep. A schema over MaxSchemaEvaluations is refused at load, naming the
// depth at which it passes; an answer deeper than MaxAnswerDepth is never
// validated (probe/plan), so no answer costs more than the bound times its
// values.
//
// The count is an upper bound: for a value's members it takes each
// subschema's costliest member and adds them over the subschemas that
// apply to the value, as if one key were the costliest for all of them.
// Only a schema whose subschemas recurse through different properties of
// one value at every level is over-counted; it is refused as if they
// recursed through the same one.
//
// A loop of subschemas that never descends into the answer ($ref to an
// ancestor through allOf, say) is refused: the validator fails every value
// that reaches it ("$ref cycle"), so no answer could match.
func schemaCost(root *jsonschema.Schema) (depth, evaluations int, err error) {
	g := costGraph{index: map[*jsonschema.Schema]int{}}
	g.add(root)
	for i := 0; i < len(g.schemas); i++ {
		g.link(i)
	}
	order, err := g.sameOrder()
	if err != nil {
		return 0, 0, err
	}
	// w[i] is, for the current level k, the evaluations at a value k
	// levels below one that schemas[i] is applied to; prev the level
	// above. Saturated past the bound, so that a sum never overflows.
	const ceiling = MaxSchemaEvaluations + 1
	sat := func(a, b int) int { return min(a+b, ceiling) }
	at := func(w []int, i int) int {
		if i < 0 {
			return 0
		}
		return w[i]
	}
	prev := make([]int, len(g.nodes))
	w := make([]int, len(g.nodes))
	for k := 0; k <= MaxAnswerDepth; k++ {
		for _, i := range order {
			n := &g.nodes[i]
			c := 0
			if k == 0 {
				c = 1
			}
			for _, j := range n.same {
				c = sat(c, w[j])
			}
			for _, grp := range n.either {
				m := 0
				for _, j := range grp {
					m = max(m, w[j])
				}
				c = sat(c, m)
			}
			if k > 0 {
				obj := 0
				for _, j := range n.props {
					obj = max(obj, prev[j])
				}
				for _, j := range n.patterns {
					obj = sat(obj, prev[j])
				}
				obj = max(obj, at(prev, n.additional), at(prev, n.unevalProps), at(prev, n.names))
				arr := max(at(prev, n.items), at(prev, n.addItems), at(prev, n.unevalIt))
				for _, j := range n.prefix {
					arr = max(arr, prev[j])
				}
				arr = sat(arr, at(prev, n.contains))
				c = sat(c, max(obj, arr))
			}
			w[i] = c
		}
		if w[0] > evaluations {
			depth, evaluations = k, w[0]
		}
		if evaluations > MaxSchemaEvaluations {
			return depth, evaluations, nil
		}
		prev, w = w, prev
	}
	return depth, evaluations, nil
}

// costGraph holds a compiled schema's subschemas, reachable from its root
// (index 0), and how each applies the others.
type costGraph struct {
	index   map[*jsonschema.Schema]int
	schemas []*jsonschema.Schema
	nodes   []costNode
}

// add indexes s (nil: -1), to be linked in turn.
func (g *costGraph) add(s *jsonschema.Schema) int {
	if s == nil {
		return -1
	}
	if i, ok := g.index[s]; ok {
		return i
	}
	g.index[s] = len(g.schemas)
	g.schemas = append(g.schemas, s)
	g.nodes = append(g.nodes, costNode{}) // link fills it
	return len(g.schemas) - 1
}

func (g *costGraph) addAll(list []*jsonschema.Schema) []int {
	out := make([]int, 0, len(list))
	for _, s := range list {
		out = append(out, g.add(s))
	}
	return out
}

// addAny indexes a keyword whose value is a boolean or a schema.
func (g *costGraph) addAny(v any) int {
	if s, ok := v.(*jsonschema.Schema); ok {
		return g.add(s)
	}
	return -1
}

// link records node i's edges, indexing the subschemas they reach.
func (g *costGraph) link(i int) {
	s := g.schemas[i]
	var n costNode
	n.same = g.addAll([]*jsonschema.Schema{s.Ref, s.Not, s.If})
	n.same = append(n.same, g.addAll(s.AllOf)...)
	n.same = append(n.same, g.addAll(s.AnyOf)...)
	n.same = append(n.same, g.addAll(s.OneOf)...)
	for _, d := range s.DependentSchemas {
		n.same = append(n.same, g.add(d))
	}
	for _, d := range s.Dependencies {
		if d, ok := d.(*jsonschema.Schema); ok {
			n.same = append(n.same, g.add(d))
		}
	}
	n.same = dropNone(n.same)
	if grp := dropNone([]int{g.add(s.Then), g.add(s.Else)}); len(grp) > 0 {
		n.either = append(n.either, grp)
	}
	n.dynamic, n.recursive = -1, -1
	if d := s.DynamicRef; d != nil {
		n.dynamic = len(n.either)
		n.either = append(n.either, []int{g.add(d.Ref)})
	}
	if s.RecursiveRef != nil {
		n.recursive = len(n.either)
		n.either = append(n.either, []int{g.add(s.RecursiveRef)})
	}
	for _, p := range s.Properties {
		n.props = append(n.props, g.add(p))
	}
	for _, p := range s.PatternProperties {
		n.patterns = append(n.patterns, g.add(p))
	}
	n.additional = g.addAny(s.AdditionalProperties)
	n.unevalProps = g.add(s.UnevaluatedProperties)
	n.names = g.add(s.PropertyNames)
	n.prefix = g.addAll(s.PrefixItems)
	n.items = -1
	switch items := s.Items.(type) {
	case *jsonschema.Schema:
		n.items = g.add(items)
	case []*jsonschema.Schema:
		n.prefix = append(n.prefix, g.addAll(items)...)
	}
	if n.items < 0 {
		n.items = g.add(s.Items2020)
	}
	n.addItems = g.addAny(s.AdditionalItems)
	n.unevalIt = g.add(s.UnevaluatedItems)
	n.contains = g.add(s.Contains)
	g.nodes[i] = n
}

// appendOthers appends to a group the members of more it lacks.
func appendOthers(grp, more []int) []int {
	for _, j := range more {
		if !slices.Contains(grp, j) {
			grp = append(grp, j)
		}
	}
	return grp
}

func dropNone(xs []int) []int {
	out := xs[:0]
	for _, x := range xs {
		if x >= 0 {
			out = append(out, x)
		}
	}
	return out
}

// sameOrder returns the nodes in an order in which every node comes after
// those it applies to the same value, once the dynamic references' other
// targets are linked: every subschema that declares the $dynamicAnchor a
// $dynamicRef names (the validator picks the outermost on its path), and
// every one with $recursiveAnchor for a $recursiveRef whose target has it.
// A loop among them is an error naming one of its subschemas.
func (g *costGraph) sameOrder() ([]int, error) {
	anchors := map[string][]int{}
	var recursive []int
	for j, t := range g.schemas {
		if t.DynamicAnchor != "" {
			anchors[t.DynamicAnchor] = append(anchors[t.DynamicAnchor], j)
		}
		if t.RecursiveAnchor {
			recursive = append(recursive, j)
		}
	}
	for i, s := range g.schemas {
		n := &g.nodes[i]
		if d := s.DynamicRef; d != nil && d.Anchor != "" && d.Ref.DynamicAnchor == d.Anchor {
			n.either[n.dynamic] = appendOthers(n.either[n.dynamic], anchors[d.Anchor])
		}
		if r := s.RecursiveRef; r != nil && r.RecursiveAnchor {
			n.either[n.recursive] = appendOthers(n.either[n.recursive], recursive)
		}
	}
	const (
		unseen = iota
		open
		done
	)
	state := make([]int, len(g.nodes))
	order := make([]int, 0, len(g.nodes))
	var visit func(i int) error
	visit = func(i int) error {
		switch state[i] {
		case open:
			return fmt.Errorf("%s applies itself to the same value again (a loop of $ref, allOf, anyOf, oneOf, not or if that never descends into the answer): the validator fails every value that reaches it", schemaLocation(g.schemas[i]))
		case done:
			return nil
		}
		state[i] = open
		n := &g.nodes[i]
		for _, j := range n.same {
			if err := visit(j); err != nil {
				return err
			}
		}
		for _, grp := range n.either {
			for _, j := range grp {
				if err := visit(j); err != nil {
					return err
				}
			}
		}
		state[i] = done
		order = append(order, i)
		return nil
	}
	for i := range g.nodes {
		if err := visit(i); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// schemaLocation is a subschema's location within its document, as its
// JSON pointer ("#/$defs/node"), or its URL when it is another document
// (a metaschema).
func schemaLocation(s *jsonschema.Schema) string {
	if rest, ok := strings.CutPrefix(s.Location, schemaURL); ok {
		if rest == "" {
			return "#"
		}
		return rest
	}
	return s.Location
}
