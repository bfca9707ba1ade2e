package prober

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
)

// redacted replaces a credential wherever it would appear.
const redacted = "<redacted>"

// scrub replaces every secret in s.
func scrub(s string, secrets []string) string {
	for _, sec := range secrets {
		if sec != "" && strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, redacted)
		}
	}
	return s
}

// scrubWriter scrubs secrets from each Write. slog's handlers write one
// whole record per Write, so a secret is never split across two calls.
type scrubWriter struct {
	w       io.Writer
	secrets []string
}

func (s scrubWriter) Write(p []byte) (int, error) {
	for _, sec := range s.secrets {
		if sec != "" && bytes.Contains(p, []byte(sec)) {
			p = bytes.ReplaceAll(p, []byte(sec), []byte(redacted))
		}
	}
	_, err := s.w.Write(p)
	// Report the caller's length: the scrubbed line may differ in size.
	return len(p), err
}

// teeHandler sends a probe's log records to the probe's own buffer (every
// level, for debug=true and the history) and, demoted to debug level and
// scrubbed of secrets, to the exporter's logger, as blackbox_exporter's
// scrape logger does: a failing probe is reported by its metrics, not by
// log lines at every scrape.
type teeHandler struct {
	buf     slog.Handler
	next    slog.Handler
	secrets []string
}

func (t *teeHandler) Enabled(context.Context, slog.Level) bool { return true }

func (t *teeHandler) Handle(ctx context.Context, r slog.Record) error {
	err := t.buf.Handle(ctx, r)
	if t.next.Enabled(ctx, slog.LevelDebug) {
		out := slog.NewRecord(r.Time, slog.LevelDebug, scrub(r.Message, t.secrets), r.PC)
		r.Attrs(func(a slog.Attr) bool {
			out.AddAttrs(scrubAttr(a, t.secrets))
			return true
		})
		_ = t.next.Handle(ctx, out)
	}
	return err
}

func (t *teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	scrubbed := make([]slog.Attr, len(as))
	for i, a := range as {
		scrubbed[i] = scrubAttr(a, t.secrets)
	}
	return &teeHandler{buf: t.buf.WithAttrs(as), next: t.next.WithAttrs(scrubbed), secrets: t.secrets}
}

func (t *teeHandler) WithGroup(name string) slog.Handler {
	return &teeHandler{buf: t.buf.WithGroup(name), next: t.next.WithGroup(name), secrets: t.secrets}
}

// scrubAttr returns a with every secret removed from its value's text.
func scrubAttr(a slog.Attr, secrets []string) slog.Attr {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, ga := range g {
			out[i] = scrubAttr(ga, secrets)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	}
	if s := v.String(); scrub(s, secrets) != s {
		return slog.String(a.Key, scrub(s, secrets))
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// newProbeLogger returns a logger that writes to buf (scrubbed) and to
// parent (demoted, scrubbed).
func newProbeLogger(parent *slog.Logger, buf *bytes.Buffer, secrets []string) *slog.Logger {
	bufHandler := slog.NewTextHandler(scrubWriter{w: buf, secrets: secrets}, &slog.HandlerOptions{Level: slog.LevelDebug})
	return slog.New(&teeHandler{buf: bufHandler, next: parent.Handler(), secrets: secrets})
}
