package ctxio

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReaderChunksAndEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := Reader{Ctx: ctx, R: strings.NewReader("abcdef"), Chunk: 2}
	p := make([]byte, 6)
	if n, err := r.Read(p); n != 2 || err != nil {
		t.Fatalf("read %d, %v; want 2 bytes", n, err)
	}
	cancel()
	if _, err := r.Read(p); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v", err)
	}
	b, err := io.ReadAll(Reader{Ctx: context.Background(), R: strings.NewReader("xyz")})
	if string(b) != "xyz" || err != nil {
		t.Fatalf("unchunked: %q, %v", b, err)
	}
}
