package config

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

type applyFunc func(context.Context, *Config) error

func (f applyFunc) Apply(ctx context.Context, c *Config) error { return f(ctx, c) }

// TestReloadLogs: a failed load says whether a previous configuration keeps
// running; on the first load there is none.
func TestReloadLogs(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	good, bad := &Config{}, errors.New("c.yml:3: bad")
	next := func() (*Config, error) { return nil, bad }
	r := NewReloader(func() (*Config, error) { return next() }, applyFunc(func(context.Context, *Config) error { return nil }), prometheus.NewRegistry(), logger)
	ctx := context.Background()

	for i, step := range []struct {
		load    func() (*Config, error)
		want    string
		wantNot string
		wantErr bool
	}{
		{load: func() (*Config, error) { return nil, bad }, wantErr: true,
			want: `msg="configuration not loaded; no previous configuration is running"`, wantNot: "keeps running"},
		{load: func() (*Config, error) { return good, nil }, want: `msg="configuration loaded"`},
		{load: func() (*Config, error) { return nil, bad }, wantErr: true,
			want: `msg="configuration not loaded; the previous one keeps running"`, wantNot: "no previous"},
	} {
		logs.Reset()
		next = step.load
		if err := r.Reload(ctx); (err != nil) != step.wantErr {
			t.Fatalf("step %d: error %v", i, err)
		}
		out := logs.String()
		if !strings.Contains(out, step.want) || (step.wantNot != "" && strings.Contains(out, step.wantNot)) {
			t.Errorf("step %d: log %q, want %q", i, out, step.want)
		}
		if step.wantErr && !strings.Contains(out, `err="c.yml:3: bad"`) {
			t.Errorf("step %d: log %q lacks the error", i, out)
		}
	}
	if r.Current() != good {
		t.Error("the good configuration is not kept")
	}
}
