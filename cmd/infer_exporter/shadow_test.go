package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestShadowSafeByDefault: the shadow proxy redacts unless told not to,
// refuses to start without a store (its help says the flag is required),
// and answers / on its listener with what it does.
func TestShadowSafeByDefault(t *testing.T) {
	if code := run(context.Background(), []string{"shadow", "--shadow.listen-address=127.0.0.1:0", "--shadow.upstream=http://127.0.0.1:1"}); code != 2 {
		t.Errorf("shadow without --shadow.store.dir: exit %d, want 2 (a usage error)", code)
	}
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{nil, "Redaction: on"},
		{[]string{"--no-shadow.redact"}, "Redaction: <b>off</b>"},
	} {
		web, proxy := freeAddr(t), freeAddr(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int)
		args := append([]string{"shadow", "--web.listen-address=" + web, "--shadow.listen-address=" + proxy,
			"--shadow.upstream=http://127.0.0.1:1", "--shadow.store.dir=" + t.TempDir()}, tc.flags...)
		go func() { done <- run(ctx, args) }()
		client := &http.Client{Timeout: 2 * time.Second}
		var page string
		exited, code := false, 0
	wait:
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			select {
			case code = <-done:
				exited = true
				break wait
			default:
			}
			resp, err := client.Get("http://" + web + "/")
			if err != nil {
				continue
			}
			resp.Body.Close()
			page = get(t, client, "http://"+web+"/")
			checkHelp(t, scrape(t, "http://"+web+"/metrics"))
			break
		}
		cancel()
		if exited {
			t.Fatalf("shadow %v exited %d before its landing page answered", tc.flags, code)
		}
		<-done
		if !strings.Contains(page, tc.want) || !strings.Contains(page, `href="/metrics"`) {
			t.Errorf("shadow %v: landing page lacks %q:\n%s", tc.flags, tc.want, page)
		}
	}
	help := strings.ReplaceAll(runChild(t, "shadow", "--help"), "--[no-]", "--")
	// Its metrics port is its own: an exporter and a capture proxy on one
	// host both start with their defaults.
	if DefaultShadowMetricsAddress == DefaultListenAddress || DefaultShadowMetricsAddress == DefaultSimulatorAddress {
		t.Errorf("shadow's metrics default %s is another command's", DefaultShadowMetricsAddress)
	}
	if !strings.Contains(help, DefaultShadowMetricsAddress) || strings.Contains(help, DefaultListenAddress) {
		t.Errorf("shadow --help does not show its metrics default %s:\n%s", DefaultShadowMetricsAddress, help)
	}
	if !strings.Contains(help, "--shadow.redact") || !strings.Contains(help, "(the default)") {
		t.Errorf("shadow --help does not say redaction is the default:\n%s", help)
	}
	if !strings.Contains(runChild(t, "shadow"), "required flag --shadow.store.dir not provided") &&
		!strings.Contains(runChild(t, "shadow"), "--shadow.store.dir") {
		t.Errorf("shadow without flags does not name --shadow.store.dir")
	}
}
