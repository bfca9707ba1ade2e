package h1

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// piecesBody is a body in pieces, as probe/client's bodies are.
type piecesBody struct {
	pieces [][]byte
	taken  bool
}

func (b *piecesBody) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF } // Pieces must be used
func (b *piecesBody) Close() error             { return nil }
func (b *piecesBody) Pieces() [][]byte         { b.taken = true; return b.pieces }

// TestPiecesWritten: a body in pieces (Pieces) is sent as the pieces in
// order with their length, small (copied into the head's one write) or
// large (a vectored write after the head), and the pieces are left as
// they were: they are a workload's shared images, which a second request,
// or the same one sent again, writes anew.
func TestPiecesWritten(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	}))
	defer srv.Close()
	rt := New(Options{})
	defer rt.CloseIdleConnections()
	shared := bytes.Repeat([]byte("0123456789abcdef"), 4<<10) // 64 KiB
	for _, tc := range []struct {
		name   string
		pieces [][]byte
	}{
		{"small", [][]byte{[]byte(`{"a":"`), shared[:100], []byte(`","b":"`), shared[:7], []byte(`"}`)}},
		{"large", [][]byte{[]byte(`{"a":"`), shared, []byte(`","b":"`), shared[16:], []byte(`"}`)}},
		{"one", [][]byte{shared}},
		{"empty pieces", [][]byte{{}, []byte("x"), {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := bytes.Join(tc.pieces, nil)
			lens := make([]int, len(tc.pieces))
			for i, p := range tc.pieces {
				lens[i] = len(p)
			}
			for try := range 2 {
				body := &piecesBody{pieces: tc.pieces}
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", body)
				req.ContentLength = int64(len(want))
				resp, err := rt.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || !body.taken {
					t.Fatalf("try %d: %v, pieces taken %v", try, err, body.taken)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("try %d: the server read %d bytes %q..., want %d", try, len(got), strings.ToValidUTF8(string(got[:min(len(got), 40)]), "?"), len(want))
				}
				for i, p := range tc.pieces {
					if len(p) != lens[i] {
						t.Fatalf("try %d: piece %d is %d bytes after the write, was %d", try, i, len(p), lens[i])
					}
				}
			}
			if !bytes.Equal(bytes.Join(tc.pieces, nil), want) {
				t.Error("the pieces' bytes changed")
			}
		})
	}
}
