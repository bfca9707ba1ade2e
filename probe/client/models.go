package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/internal/textcut"
	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// The bounds of what a server's /v1/models is believed about: the answer
// read, the names quoted and each name's length. The server is not
// trusted, and a sentence that quotes it goes to a log line or a console.
const (
	maxModelsBytes = 1 << 20
	// MaxModelsShown is how many served models a sentence names.
	MaxModelsShown = 10
	maxModelName   = 128
	maxErrShown    = 300
	// modelsTimeout bounds one look at /v1/models, within the caller's
	// context.
	modelsTimeout = 10 * time.Second
)

// Models is what a server's /v1/models said: the ids it lists, the URL
// asked, or why it could not be read.
type Models struct {
	IDs []string
	URL string
	Err error
}

// Models asks t's server which models it serves (GET /v1/models, the
// OpenAI-compatible list, which vLLM, SGLang, llama.cpp, Ollama and TGI
// answer), with t's credentials and headers, through c's transport (so a
// probe's allow list checks the connection as it does the requests').
func (c *Client) Models(ctx context.Context, t *Target) Models {
	ctx, cancel := context.WithTimeout(ctx, modelsTimeout)
	defer cancel()
	m := Models{URL: endpoint(t.BaseURL, "/models")}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.URL, nil)
	if err != nil {
		m.Err = err
		return m
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	config.SetTargetHeaders(req, t.Headers, t.BearerToken)
	resp, err := c.http.Do(req)
	if err != nil {
		m.Err = redact(fmt.Errorf("%s: %w", m.URL, err), t.BearerToken)
		return m
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		m.Err = fmt.Errorf("%s answered %s", m.URL, resp.Status)
		return m
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxModelsBytes)).Decode(&list); err != nil {
		m.Err = fmt.Errorf("%s: %w", m.URL, err)
		return m
	}
	m.IDs = make([]string, 0, len(list.Data))
	for _, d := range list.Data {
		m.IDs = append(m.IDs, d.ID)
	}
	return m
}

// NotServed is the plain sentence for requests of model that the server
// refused as not found, given what its /v1/models said: that it does not
// serve the model, and what it serves (at most MaxModelsShown names, each
// cut and with control characters escaped); or that it lists the model
// all the same; or why the list could not be read.
func (m Models) NotServed(model string) string {
	switch {
	case m.Err != nil:
		return fmt.Sprintf("the server answered 404 (not found) for model %q, and %s", model, printable(textcut.Cut(m.Err.Error(), maxErrShown)))
	case slices.Contains(m.IDs, model):
		return fmt.Sprintf("the server answered 404 (not found), though %s lists model %q", m.URL, model)
	}
	return fmt.Sprintf("the server does not serve model %q; it serves: %s (%s)", model, ListModels(m.IDs, MaxModelsShown), m.URL)
}

// ListModels joins at most n of ids, each made safe to print, with "..."
// for the rest and "none" for an empty list.
func ListModels(ids []string, n int) string {
	if len(ids) == 0 {
		return "none"
	}
	shown := make([]string, 0, min(len(ids), n))
	for _, id := range ids[:min(len(ids), n)] {
		shown = append(shown, printable(textcut.Cut(id, maxModelName)))
	}
	if len(ids) > n {
		shown = append(shown, "...")
	}
	return strings.Join(shown, ", ")
}

// printable is s as it is when every character prints, else quoted with
// Go's escapes: a name from a server cannot start a new log line or move
// a terminal's cursor.
func printable(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return s
	}
	return strconv.Quote(s)
}

// ModelRefused says whether a request ended as a server does when it does
// not serve the model asked for: HTTP 404 (vLLM, SGLang, Ollama and the
// simulator answer so), or another 4xx whose body says the model is not
// found or does not exist.
func ModelRefused(o *observation.Request) bool {
	if o.HTTPStatus == http.StatusNotFound {
		return true
	}
	if o.HTTPStatus < 400 || o.HTTPStatus > 499 {
		return false
	}
	var he *HTTPError
	if !errors.As(o.Err, &he) {
		return false
	}
	body := strings.ToLower(he.Body)
	return strings.Contains(body, "model") && (strings.Contains(body, "not found") || strings.Contains(body, "does not exist"))
}

// ModelWatch remembers, per target, what was said of its refused model, so
// that it is said once rather than at each refused request, and again only
// after the target served a request since. It is safe for concurrent use.
// The caller asks Due on a refused request, looks at the server's models
// when it is (Client.Models), says the sentence and records it with Say;
// each success is told to Served.
type ModelWatch struct {
	mu   sync.Mutex
	said map[string]string // by watchKey: the sentence said since the last success
	busy map[string]bool   // by watchKey: a look is under way
	// any counts the keys in said and busy, so that Served, on every
	// successful request, takes no lock while nothing was said.
	any atomic.Int64
}

// watchKey names a target's model at its server: a reload that changes the
// model or the URL starts a new story.
func watchKey(t *Target) string { return t.Name + "\x00" + t.BaseURL + "\x00" + t.Model }

// Due says whether t's refused request calls for a look at its server's
// models: nothing was said of it since its last success, and no look is
// under way. When Due is true the caller must call Say.
func (w *ModelWatch) Due(t *Target) bool {
	k := watchKey(t)
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.said[k]; ok || w.busy[k] {
		return false
	}
	if w.busy == nil {
		w.busy, w.said = map[string]bool{}, map[string]string{}
	}
	w.busy[k] = true
	w.any.Add(1)
	return true
}

// Say records the sentence said after the look Due allowed.
func (w *ModelWatch) Say(t *Target, sentence string) {
	k := watchKey(t)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.busy[k] {
		delete(w.busy, k)
		w.any.Add(-1)
	}
	if _, ok := w.said[k]; !ok {
		w.any.Add(1)
	}
	w.said[k] = sentence
}

// Said is what was said of t since its last success, or "".
func (w *ModelWatch) Said(t *Target) string {
	if w.any.Load() == 0 {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.said[watchKey(t)]
}

// Served tells w that t served a request: what was said of it is
// forgotten, so that a later refusal is said again.
func (w *ModelWatch) Served(t *Target) {
	if w.any.Load() == 0 {
		return
	}
	k := watchKey(t)
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.said[k]; ok {
		delete(w.said, k)
		w.any.Add(-1)
	}
}
