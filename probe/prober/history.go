package prober

import (
	"fmt"
	"html"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultHistoryLimit is the number of recent probes a history keeps.
const DefaultHistoryLimit = 100

// LogsPath is where the lead wires History's debug pages; the landing page
// links to it relative to "/".
const LogsPath = "/probe/logs"

// History keeps the most recent probes and their debug output, for the
// landing page. It is a bounded ring: memory does not grow with scrapes.
// Everything in it is already scrubbed of credentials.
type History struct {
	mu      sync.Mutex
	limit   int
	entries []historyEntry // ring, oldest overwritten first
	next    int            // slot of the next entry
	nextID  int64
}

type historyEntry struct {
	id       int64
	at       time.Time
	module   string
	target   string // displayTarget form
	success  bool
	reason   string
	duration time.Duration
	debug    string
}

// NewHistory returns a history of at most limit probes (DefaultHistoryLimit
// when limit <= 0).
func NewHistory(limit int) *History {
	if limit <= 0 {
		limit = DefaultHistoryLimit
	}
	return &History{limit: limit}
}

// maxDebugBytes bounds one entry's debug output.
const maxDebugBytes = 256 << 10

func (h *History) add(e historyEntry) {
	if len(e.debug) > maxDebugBytes {
		e.debug = e.debug[:maxDebugBytes] + "\n[debug output truncated]\n"
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	e.id = h.nextID
	h.nextID++
	if len(h.entries) < h.limit {
		h.entries = append(h.entries, e)
		return
	}
	h.entries[h.next] = e
	h.next = (h.next + 1) % h.limit
}

// recent returns the entries, newest first.
func (h *History) recent() []historyEntry {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]historyEntry, 0, len(h.entries))
	for i := len(h.entries) - 1; i >= 0; i-- {
		out = append(out, h.entries[(h.next+i)%len(h.entries)])
	}
	return out
}

func (h *History) get(id int64) (historyEntry, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.entries {
		if e.id == id {
			return e, true
		}
	}
	return historyEntry{}, false
}

// HTML renders the recent probes as a table for the landing page, newest
// first, each linking to its debug output at LogsPath. Every value is
// escaped: targets and module names come from scrapes, not the operator.
func (h *History) HTML() string {
	return h.table(strings.TrimPrefix(LogsPath, "/"))
}

// table renders the recent probes, each linking to link?id=N.
func (h *History) table(link string) string {
	var b strings.Builder
	b.WriteString("<h2>Recent probes</h2>\n")
	entries := h.recent()
	if len(entries) == 0 {
		b.WriteString("<p>No probes yet.</p>\n")
		return b.String()
	}
	b.WriteString("<table>\n<tr><th>Time</th><th>Module</th><th>Target</th><th>Result</th><th>Duration</th><th>Debug</th></tr>\n")
	for _, e := range entries {
		result := "Success"
		if !e.success {
			result = "Failure: " + e.reason
		}
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td><a href=\"%s?id=%d\">Logs</a></td></tr>\n",
			html.EscapeString(e.at.UTC().Format(time.RFC3339)),
			html.EscapeString(e.module),
			html.EscapeString(e.target),
			html.EscapeString(result),
			html.EscapeString(e.duration.Round(time.Millisecond).String()),
			html.EscapeString(link), e.id)
	}
	b.WriteString("</table>\n")
	return b.String()
}

// ServeHTTP serves the debug output of the probe ?id=N as plain text, and
// without an id the list of recent probes (the landing page's link).
func (h *History) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !r.URL.Query().Has("id") {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!DOCTYPE html>\n<html><head><title>Recent probes</title></head><body>\n%s<p><a href=\"/\">Back</a></p></body></html>\n",
			h.table(""))
		return
	}
	id, err := strconv.ParseInt(r.URL.Query().Get("id"), 10, 64)
	if err != nil {
		http.Error(w, "id must be the number of a recent probe", http.StatusBadRequest)
		return
	}
	e, ok := h.get(id)
	if !ok {
		http.Error(w, "probe not found: it may have left the history", http.StatusNotFound)
		return
	}
	writeText(w, e.debug)
}

// writeText writes s as plain text that no browser will sniff into HTML:
// debug output quotes what servers answered.
func writeText(w http.ResponseWriter, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write([]byte(s))
}
