//go:build unix

package otlp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNewRefusesFIFOCertificate: a certificate or key variable naming a
// FIFO is refused at start, naming the variable and the path, instead of
// the open waiting for a writer that never comes (which no signal ends:
// serve and bench hung, SIGTERM ignored). Every prefix the push reads
// (the general one and each signal's) and every file variable of each.
// The other file of a client pair is a regular file, so that the check
// reaches the FIFO.
//
// The deadline only turns a hang into a failure; the assertion is on the
// error's text. On a hang the FIFO is opened for writing, which ends the
// stuck open, so that the test's goroutine does not outlive it.
func TestNewRefusesFIFOCertificate(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "cert.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	regular := filepath.Join(dir, "other.pem")
	if err := os.WriteFile(regular, []byte("not read past its type"), 0o600); err != nil {
		t.Fatal(err)
	}
	var cases []struct{ fifoVar, pairVar string }
	for _, prefix := range []string{exporterPrefix, exporterPrefix + "TRACES_", exporterPrefix + "METRICS_"} {
		cases = append(cases,
			struct{ fifoVar, pairVar string }{prefix + "CERTIFICATE", ""},
			struct{ fifoVar, pairVar string }{prefix + "CLIENT_CERTIFICATE", prefix + "CLIENT_KEY"},
			struct{ fifoVar, pairVar string }{prefix + "CLIENT_KEY", prefix + "CLIENT_CERTIFICATE"},
		)
	}
	for _, tc := range cases {
		t.Run(tc.fifoVar, func(t *testing.T) {
			kv := []string{tc.fifoVar, fifo}
			if tc.pairVar != "" {
				kv = append(kv, tc.pairVar, regular)
			}
			done := make(chan error, 1)
			go func() {
				p, err := New(context.Background(), Options{Endpoint: "http://127.0.0.1:1", Getenv: env(kv...)})
				if err == nil {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					defer cancel()
					_ = p.Shutdown(ctx)
				}
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				if w, werr := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); werr == nil {
					w.Close()
				}
				t.Fatalf("%s naming a FIFO: the start still waits after 10 s", tc.fifoVar)
			}
			if err == nil {
				t.Fatalf("%s naming a FIFO accepted", tc.fifoVar)
			}
			want := tc.fifoVar + "=" + `"` + fifo + `": not a regular file (a FIFO (named pipe))`
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q, want it to say %q", err, want)
			}
		})
	}
}
