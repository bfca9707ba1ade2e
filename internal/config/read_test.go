//go:build unix

package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mkfifo makes a FIFO in a temporary directory. Its cleanup opens it for
// writing and closes it, which releases any reader still blocked in an open
// of it.
func mkfifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fifo.yml")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	return p
}

// loadCanceled runs load with a context canceled after 100 ms and returns
// its error, failing the test when it has not returned 1 s after the
// cancel.
func loadCanceled(t *testing.T, load func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- load(ctx) }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Second):
		t.Fatal("the load did not end within 1 s of the cancel")
		return nil
	}
}

// TestLoadFileContextFIFO: a configuration file that is a FIFO with no
// writer ends the load when the context ends (a SIGTERM), with an error that
// names the file and wraps the context's.
func TestLoadFileContextFIFO(t *testing.T) {
	p := mkfifo(t)
	err := loadCanceled(t, func(ctx context.Context) error {
		_, err := LoadFileContext(ctx, p)
		return err
	})
	var ce *Error
	if !errors.Is(err, context.Canceled) || !errors.As(err, &ce) || ce.File != p {
		t.Fatalf("error %v: want an *Error naming the file, wrapping context.Canceled", err)
	}
	if want := p + ": not read: context canceled"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

// TestReadWaitingFIFO: the reader of other systems ends with its context too.
func TestReadWaitingFIFO(t *testing.T) {
	p := mkfifo(t)
	err := loadCanceled(t, func(ctx context.Context) error {
		_, err := readWaiting(ctx, p, MaxFileBytes)
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

// TestLoadFileContextFIFOWriter: a FIFO that a writer feeds is read to its
// end, as a blocking read would.
func TestLoadFileContextFIFOWriter(t *testing.T) {
	p := mkfifo(t)
	go func() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0) // blocks until the reader opens
		if err != nil {
			return
		}
		defer f.Close()
		for _, part := range strings.SplitAfter(base, "\n") {
			_, _ = f.WriteString(part)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := LoadFileContext(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Targets) != 1 || len(c.Workloads) != 1 {
		t.Errorf("config %+v", c)
	}
}

// TestReadFileLimits: /dev/zero and a large regular file are refused with
// the limit, without reading them whole.
func TestReadFileLimits(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.yml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil { // sparse: 1 TiB of nothing
		t.Skipf("truncate: %v", err)
	}
	f.Close()
	for _, name := range []string{"/dev/zero", big} {
		if _, err := os.Stat(name); err != nil {
			t.Logf("skipping %s: %v", name, err)
			continue
		}
		_, err := LoadFile(name)
		if want := name + ": file larger than 1 MiB (config.MaxFileBytes)"; err == nil || err.Error() != want {
			t.Errorf("error %v, want %q", err, want)
		}
	}
	_, err = LoadFile(filepath.Join(t.TempDir(), "missing.yml"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("error %v", err)
	}
}

// TestSecretLimits: a bearer_token_file is at most MaxSecretBytes, and one
// that blocks (a FIFO without a writer) ends after secretReadTimeout.
func TestSecretLimits(t *testing.T) {
	old := secretReadTimeout
	secretReadTimeout = 100 * time.Millisecond
	defer func() { secretReadTimeout = old }()
	dir := t.TempDir()
	writeFile(t, dir, "big", strings.Repeat("k", MaxSecretBytes+1))
	writeFile(t, dir, "ok", strings.Repeat("k", MaxSecretBytes-1)+"\n")
	fifo := mkfifo(t)
	for _, tc := range []struct{ file, want string }{
		{"big", "c.yml:5: targets[0].bearer_token_file: cannot read: larger than 64 KiB (config.MaxSecretBytes)"},
		{fifo, "c.yml:5: targets[0].bearer_token_file: cannot read: no data within 100ms (a FIFO without a writer?)"},
		{"missing", "c.yml:5: targets[0].bearer_token_file: cannot read: no such file or directory"},
	} {
		y := strings.Replace(base, "model: m", "model: m\n    bearer_token_file: "+tc.file, 1)
		_, err := Parse([]byte(y), filepath.Join(dir, "c.yml"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.file, err, tc.want)
		}
	}
	y := strings.Replace(base, "model: m", "model: m\n    bearer_token_file: ok", 1)
	c, err := Parse([]byte(y), filepath.Join(dir, "c.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Targets[0].BearerToken) != MaxSecretBytes-1 {
		t.Errorf("token of %d bytes", len(c.Targets[0].BearerToken))
	}
}
