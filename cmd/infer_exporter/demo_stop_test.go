package main

import (
	"context"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDemoStopsWithStatusZero: Ctrl-C (the signal context's end) stops the
// demo with status 0, and make demo runs the binary itself, not through go
// run, which exits 1 when interrupted (make then ended the demo with
// "Error 1").
func TestDemoStopsWithStatusZero(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--demo", "--web.listen-address=" + addr, "--log.level=warn", "--no-collector.nvml"})
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the demo did not become ready")
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("the demo stopped with status %d, want 0", code)
		}
	case <-time.After(time.Until(testDeadline(t))):
		t.Fatal("the demo did not stop")
	}

	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	recipe := regexp.MustCompile(`(?m)^demo:\n((?:\t.*\n)+)`).FindStringSubmatch(string(b))
	if recipe == nil {
		t.Fatal("the Makefile has no demo target")
	}
	if strings.Contains(recipe[1], "$(GO) run") || !strings.Contains(recipe[1], "--demo") {
		t.Errorf("make demo does not run the built binary:\n%s", recipe[1])
	}
}
