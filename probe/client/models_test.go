package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// TestModelsNotServed: the sentence from what /v1/models answered, with
// the target's credentials sent, and a hostile list bounded: at most
// MaxModelsShown names, each cut, none able to start a new line.
func TestModelsNotServed(t *testing.T) {
	long := strings.Repeat("x", 1000)
	many := `{"data":[` + strings.Repeat(`{"id":"m"},`, 50) + `{"id":"last"}]}`
	for _, tc := range []struct {
		name, body string
		status     int
		want       []string
		not        []string
	}{
		{"not served", `{"object":"list","data":[{"id":"m1"},{"id":"m2"}]}`, 200,
			[]string{`the server does not serve model "asked"; it serves: m1, m2 (`, `/v1/models)`}, nil},
		{"listed all the same", `{"data":[{"id":"asked"}]}`, 200,
			[]string{`answered 404 (not found), though`, `lists model "asked"`}, nil},
		{"none", `{"data":[]}`, 200, []string{"it serves: none"}, nil},
		{"no list", `nope`, 404, []string{`for model "asked", and`, "answered 404 Not Found"}, nil},
		{"not JSON", `<html>`, 200, []string{`for model "asked", and`, "invalid character"}, nil},
		{"many", many, 200, []string{"it serves: m, m, m, m, m, m, m, m, m, m, ... ("}, []string{"last"}},
		{"long", `{"data":[{"id":"` + long + `"}]}`, 200, []string{strings.Repeat("x", maxModelName) + "…"}, []string{strings.Repeat("x", maxModelName+1)}},
		{"control characters", `{"data":[{"id":"a\nlevel=ERROR msg=forged\u001b[2J"}]}`, 200,
			[]string{`"a\nlevel=ERROR msg=forged\x1b[2J"`}, []string{"\n", "\x1b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/models" || r.Header.Get("Authorization") != "Bearer key" || r.Header.Get("X-Tenant") != "a" {
					http.Error(w, "wrong request", http.StatusBadRequest)
					return
				}
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			cl := New(Options{})
			defer cl.Close()
			// A trailing /v1, as OpenAI SDKs write the base URL, is the
			// same server.
			ct := &Target{BaseURL: srv.URL + "/v1/", Model: "asked", BearerToken: "key", Headers: map[string]string{"X-Tenant": "a"}}
			got := cl.Models(context.Background(), ct).NotServed("asked")
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("%q has %q", got, n)
				}
			}
		})
	}
}

// TestModelRefused: the failures that call for a look at /v1/models.
func TestModelRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    observation.Request
		want bool
	}{
		{"404", observation.Request{HTTPStatus: 404, Outcome: observation.HTTP4xx}, true},
		{"400 model not found", observation.Request{HTTPStatus: 400, Outcome: observation.HTTP4xx,
			Err: &HTTPError{StatusCode: 400, Body: `{"error":"Model 'x' not found"}`}}, true},
		{"400 does not exist", observation.Request{HTTPStatus: 400, Outcome: observation.HTTP4xx,
			Err: &HTTPError{StatusCode: 400, Body: `The model x does not exist.`}}, true},
		{"400 other", observation.Request{HTTPStatus: 400, Outcome: observation.HTTP4xx,
			Err: &HTTPError{StatusCode: 400, Body: `max_tokens too large`}}, false},
		{"429", observation.Request{HTTPStatus: 429, Outcome: observation.HTTP4xx, Err: &HTTPError{StatusCode: 429}}, false},
		{"503 model not found", observation.Request{HTTPStatus: 503, Outcome: observation.HTTP5xx,
			Err: &HTTPError{StatusCode: 503, Body: "model not found"}}, false},
		{"disconnected", observation.Request{Outcome: observation.Disconnected, Err: errors.New("reset")}, false},
		{"success", observation.Request{HTTPStatus: 200, Outcome: observation.Success}, false},
	} {
		if got := ModelRefused(&tc.o); got != tc.want {
			t.Errorf("%s: ModelRefused = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestModelWatchOnce: of many refusals at once, one look is due; after it
// was said nothing is due until a success, after which the next refusal is
// due again; another target or model is a story of its own.
func TestModelWatchOnce(t *testing.T) {
	var w ModelWatch
	a := &Target{Name: "a", BaseURL: "http://a", Model: "m"}
	w.Served(a) // nothing said: nothing to forget
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		due int
	)
	for range 50 {
		wg.Go(func() {
			if w.Due(a) {
				mu.Lock()
				due++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if due != 1 {
		t.Fatalf("%d looks due among 50 refusals at once, want 1", due)
	}
	if w.Due(a) || w.Said(a) != "" {
		t.Fatal("a second look is due while the first is under way")
	}
	w.Say(a, "said")
	if w.Due(a) || w.Said(a) != "said" {
		t.Fatalf("after Say: due again, or Said = %q", w.Said(a))
	}
	other := *a
	other.Model = "n"
	if !w.Due(&other) {
		t.Error("another model of the same target is not due")
	}
	w.Served(a)
	if w.Said(a) != "" || !w.Due(a) {
		t.Error("after a success, the next refusal is not due")
	}
}
