package prober

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// moduleToken is a module's own key, distinct from testToken.
const moduleToken = "sk-module-key-also-secret-91c2"

// authLog records the Authorization headers a server received.
type authLog struct {
	mu   sync.Mutex
	seen []string
}

func (a *authLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.seen = append(a.seen, r.Header.Get("Authorization"))
		a.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (a *authLog) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

// TestNoSecretInOutput runs probes whose servers echo the key back, in an
// error body and in the generated text, and checks that the key appears in
// no /probe answer, debug output, exporter log line, landing page or
// history page, while it is really sent where it belongs.
func TestNoSecretInOutput(t *testing.T) {
	simAuth := &authLog{}
	simSrv := httptest.NewServer(simAuth.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" fine\"}}]}\n\n")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" words\"}}]}\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	})))
	defer simSrv.Close()
	echoAuth := &authLog{}
	echo401 := httptest.NewServer(echoAuth.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "invalid key: "+r.Header.Get("Authorization"), http.StatusUnauthorized)
	})))
	defer echo401.Close()
	echoText := httptest.NewServer(echoAuth.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"your key is %s\"}}]}\n\n", key)
		fmt.Fprint(w, "data: [DONE]\n\n")
	})))
	defer echoText.Close()

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "module-key"), []byte(moduleToken), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, `targets:
  - {name: sim, url: `+simSrv.URL+`, model: m, bearer_token_file: token}
  - {name: echo401, url: `+echo401.URL+`, model: m, bearer_token_file: token}
  - {name: echotext, url: `+echoText.URL+`, model: m, bearer_token_file: token}
modules:
  plain:
    headers: {X-Api-Key: header-secret-5d1e}
  check:
    known_answers: [{prompt: "key?", expect: "^fine$"}]
  own_key:
    bearer_token_file: `+filepath.Join(dir, "module-key")+`
  sims_key:
    target: sim
probe:
  max_requests_per_second: 1000
  max_concurrent_probes: 100
`, "")
	e := newEnv(t, cfg, nil)
	secrets := []string{testToken, moduleToken, "header-secret-5d1e"}

	var outputs []string
	scrape := func(module, target string) string {
		for _, debug := range []bool{false, true} {
			_, body := e.scrape(t, module, target, "5", debug)
			outputs = append(outputs, body)
		}
		return outputs[len(outputs)-1]
	}
	if body := scrape("plain", simSrv.URL); !strings.Contains(body, "probe_success 1") ||
		!strings.Contains(body, "X-Api-Key: <hidden>") {
		t.Errorf("probe of the configured target:\n%s", body)
	}
	if body := scrape("plain", echo401.URL); !strings.Contains(body, "probe_http_status_code 401") ||
		!strings.Contains(body, "invalid key: Bearer <redacted>") {
		t.Errorf("echoed key not shown redacted:\n%s", body)
	}
	if body := scrape("check", echoText.URL); !strings.Contains(body, `answer="your key is <redacted>"`) {
		t.Errorf("echoed answer not shown redacted:\n%s", body)
	}
	// The module's own key goes to any allowed target.
	if body := scrape("own_key", echo401.URL); !strings.Contains(body, "invalid key: Bearer <redacted>") {
		t.Errorf("module key not redacted:\n%s", body)
	}
	// A module bound to sim's credentials is refused elsewhere, sending
	// nothing.
	if body := scrape("sims_key", echo401.URL); !strings.Contains(body, `probe_failed_due_to{reason="not_allowed"} 1`) ||
		!strings.Contains(body, `carries target \"sim\"'s credentials, which are sent only to that target's own origin`) {
		t.Errorf("sim's key not kept to sim:\n%s", body)
	}
	scrape("sims_key", simSrv.URL)

	// The keys were really sent, each where it belongs.
	want := "Bearer " + testToken
	for _, got := range simAuth.list() {
		if got != want {
			t.Errorf("sim got Authorization %q", got)
		}
	}
	if len(simAuth.list()) != 4 {
		t.Errorf("sim saw %d requests, want 4", len(simAuth.list()))
	}
	echoed := echoAuth.list()
	// plain: 2 requests with echo401's key (testToken); check: 2 scrapes
	// of a request and a check; own_key: 2 with the module's key.
	if len(echoed) != 8 || echoed[0] != want || echoed[5] != want || echoed[6] != "Bearer "+moduleToken || echoed[7] != "Bearer "+moduleToken {
		t.Errorf("echo servers got %d requests: %q", len(echoed), echoed)
	}

	landing := e.history.HTML()
	outputs = append(outputs, landing, e.logs.String())
	for _, entry := range e.history.recent() {
		w := newRecorder()
		e.history.ServeHTTP(w, mustRequest(t, http.MethodGet, fmt.Sprintf("%s?id=%d", LogsPath, entry.id)))
		outputs = append(outputs, w.Body.String())
	}
	if !strings.Contains(e.logs.String(), "<redacted>") {
		t.Error("the exporter's log shows no redaction: the echoed keys were not logged at all, and the test proves nothing")
	}
	for i, out := range outputs {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("output %d contains secret %q:\n%s", i, s, out)
			}
		}
	}
}
