// Package groundtruth pairs what the client measured with what the
// embedded simulator says it did. The simulator stamps every streamed chunk
// with the instant it wrote it (sim_emit_unix_nano); a transport that copies
// each response body as the client reads it lets a test or the load harness
// read those stamps back after the request and compare them, event by
// event, with the client's own read instants.
package groundtruth

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"
)

type captureKey struct{}

// WithCapture returns a context whose requests, sent through a Transport,
// have their response bodies copied into buf as they are read.
func WithCapture(ctx context.Context, buf *bytes.Buffer) context.Context {
	return context.WithValue(ctx, captureKey{}, buf)
}

// Transport copies response bodies into the buffer of WithCapture.
type Transport struct{ Inner http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.Inner.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if buf, ok := req.Context().Value(captureKey{}).(*bytes.Buffer); ok {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(resp.Body, buf), resp.Body}
	}
	return resp, nil
}

// ContentEmits returns the server's emit instant (Unix ns) of each chunk of
// an OpenAI SSE body that carries content, in order: the events a client
// counts as tokens.
func ContentEmits(body []byte) []int64 {
	var out []int64
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var chunk struct {
			Emit    int64 `json:"sim_emit_unix_nano"`
			Choices []struct {
				Delta struct {
					Content *string `json:"content"`
				} `json:"delta"`
				Text *string `json:"text"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(line), &chunk) != nil || len(chunk.Choices) == 0 {
			continue
		}
		c := chunk.Choices[0]
		if (c.Delta.Content != nil && *c.Delta.Content != "") || (c.Text != nil && *c.Text != "") {
			out = append(out, chunk.Emit)
		}
	}
	return out
}

// ReadFloor measures the machine's floor under the same comparison: a
// server in this process writes events lines, one every gap, each carrying
// its write instant, and a bare reader (bufio over the response body, no
// client, no parsing beyond the number) takes each line's read instant. It
// returns read instant minus write instant per event: what loopback, the
// kernel and the Go scheduler cost on this machine now, which no client
// can beat. Tests measure it in the same run as the client, so that a
// noisy machine moves both.
func ReadFloor(ctx context.Context, events int, gap time.Duration) ([]time.Duration, error) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, _ := w.(http.Flusher)
		w.Header().Set("Content-Type", "text/plain")
		t := time.NewTicker(gap)
		defer t.Stop()
		for range events {
			select {
			case <-r.Context().Done():
				return
			case <-t.C:
			}
			fmt.Fprintf(w, "%d\n", time.Now().UnixNano())
			if f != nil {
				f.Flush()
			}
		}
	}))
	defer srv.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := make([]time.Duration, 0, events)
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadSlice('\n')
		now := time.Now().UnixNano()
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
		sent, perr := strconv.ParseInt(string(bytes.TrimSpace(line)), 10, 64)
		if perr != nil {
			return out, perr
		}
		out = append(out, time.Duration(now-sent))
	}
}
