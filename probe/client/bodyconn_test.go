package client

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
)

// countingConn records the writes made to it.
type countingConn struct {
	net.Conn
	writes int
	buf    bytes.Buffer
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes++
	return c.buf.Write(p)
}

// TestBodyConnReadFrom: a body in memory behind net/http's LimitReader goes
// out in one write and no further than the limit; other readers are copied.
func TestBodyConnReadFrom(t *testing.T) {
	body := strings.Repeat("x", 100_000)
	for _, tc := range []struct {
		name       string
		r          io.Reader
		wantN      int64
		wantWrites int
		wantErr    error
	}{
		{"a buffer, whole", &io.LimitedReader{R: io.NopCloser(bytes.NewBufferString(body)), N: 100_000}, 100_000, 1, nil},
		{"a reader, whole", &io.LimitedReader{R: strings.NewReader(body), N: 100_000}, 100_000, 1, nil},
		{"longer than the limit", &io.LimitedReader{R: strings.NewReader(body), N: 10}, 10, 1, io.ErrShortWrite},
		{"not in memory", &io.LimitedReader{R: struct{ io.Reader }{strings.NewReader(body)}, N: 100_000}, 100_000, 4, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := &countingConn{}
			n, err := bodyConn{cc}.ReadFrom(tc.r)
			if n != tc.wantN || !errors.Is(err, tc.wantErr) {
				t.Fatalf("ReadFrom = %d, %v; want %d, %v", n, err, tc.wantN, tc.wantErr)
			}
			if cc.writes != tc.wantWrites {
				t.Errorf("%d writes, want %d", cc.writes, tc.wantWrites)
			}
			if got := cc.buf.String(); got != body[:tc.wantN] {
				t.Errorf("wrote %d bytes, not the body's first %d", len(got), tc.wantN)
			}
			if lr := tc.r.(*io.LimitedReader); lr.N != 100_000-tc.wantN && tc.wantErr == nil {
				t.Errorf("limit left %d", lr.N)
			}
		})
	}
}
