package shadow

import (
	"bytes"
	"encoding/json"
	"errors"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/infer-exporter/infer_exporter/internal/hashmix"
	"github.com/infer-exporter/infer_exporter/internal/words"
)

// redactor replaces the text of a request with filler of the same token
// length, in the simulator tokenizer's sense (whitespace-separated words):
// every word becomes one filler word, so a text of N words stays N words
// and a replay reproduces prompt lengths.
//
// What is rewritten: "prompt" and "suffix" (completions), "instructions"
// (the Responses API's system text), and in "messages" (chat) and "input"
// (the Responses API: a string, or a list of items) every string except
// "role" and "type" (message content, text parts, names, tool-call
// arguments and outputs). Token-id prompts become other ids below 32000.
// "user" (an end-user id) is removed. Other fields (model, sampling
// parameters, tool definitions, the Responses API's "text" format) are the
// application's, not the user's, and are kept.
//
// Filler words are chained, as vLLM chains its prefix-cache block hashes:
// each filler word is a keyed hash of every word before it in the request
// and of itself. Two requests that begin with the same words (a shared
// system prompt) begin with the same filler, so a replay still reproduces
// prefix sharing; where they differ, the filler diverges for the rest of
// the request. Because a filler word depends on the whole prefix, it is not
// a word-for-word code: frequency analysis has nothing to work on. The key
// is random per proxy process and never written, so filler cannot be
// matched against a guessed text.
type redactor struct {
	key uint64
}

// errNotObject is the reason a body that is not a JSON object cannot be
// redacted (and is not stored).
var errNotObject = errors.New("request body is not a JSON object")

// redact returns the body with its text replaced.
func (r *redactor) redact(body []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return nil, errNotObject
	}
	delete(m, "user")
	chain := &chain{h: r.key}
	// The fields in a fixed order, so equal requests chain equally; a
	// Responses body's instructions come before its input, as the server
	// puts them in the prompt.
	for _, field := range []string{"instructions", "input", "messages", "prompt", "suffix"} {
		raw, ok := m[field]
		if !ok {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		chain.mark(field)
		v = chain.rewrite(v, field == "prompt")
		b, err := marshal(v)
		if err != nil {
			return nil, err
		}
		m[field] = b
	}
	return marshal(m)
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// chain is the running hash of everything redacted so far in one request.
type chain struct{ h uint64 }

func (c *chain) mix(s string) {
	f := fnv.New64a()
	f.Write([]byte(s))
	c.h = hashmix.Mix64(c.h ^ f.Sum64())
}

// mark adds structure (a field name, a role) to the chain, so that the same
// words under another role give other filler.
func (c *chain) mark(s string) { c.mix("\x00" + s) }

// kept are the keys whose string values are structure, not text.
var kept = []string{"role", "type"}

// rewrite returns v with every string rewritten (and, when ids is set, every
// number: a token-id prompt).
func (c *chain) rewrite(v any, ids bool) any {
	switch v := v.(type) {
	case string:
		return c.text(v)
	case json.Number:
		if !ids {
			return v
		}
		c.mix(string(v))
		return json.Number(strconv.FormatUint(c.h%32000, 10))
	case []any:
		for i := range v {
			v[i] = c.rewrite(v[i], ids)
		}
		return v
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if s, ok := v[k].(string); ok && slices.Contains(kept, k) {
				c.mark(k + "=" + s)
				continue
			}
			c.mark(k)
			v[k] = c.rewrite(v[k], ids)
		}
		return v
	}
	return v // bool, nil
}

// text replaces each word of s by a filler word, joined by single spaces.
func (c *chain) text(s string) string {
	var b strings.Builder
	first := true
	for w := range strings.FieldsSeq(s) {
		c.mix(w)
		if !first {
			b.WriteByte(' ')
		}
		first = false
		b.WriteString(words.Word(c.h)) // the chained hash becomes a word
	}
	return b.String()
}
