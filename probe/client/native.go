package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/infer-exporter/infer_exporter/probe/sse"
)

// This file holds what the native (non-OpenAI) flavors share: request
// bodies, and an SSE decoder parameterised by a frame parser.
// The native flavors decode with encoding/json into small structs: their
// frames are rarer than a busy OpenAI stream's, and correctness comes first.

// encodeBody encodes body, then merges r.Extra into its top level (Extra
// wins), as the OpenAI flavors do.
func encodeBody(name string, body map[string]any, r *Request) (*body, error) {
	for k, v := range r.Extra {
		body[k] = v
	}
	return encodeJSON(name, body)
}

// frameParser interprets the data of one frame into c.
type frameParser interface {
	parse(data []byte, c *Chunk) error
}

// sseEnd is how a native API's SSE stream ends, beside a frame that
// says so (its parser sets Chunk.Done).
type sseEnd struct {
	// doneMarker, when set, is a data payload that ends the stream
	// ("[DONE]").
	doneMarker []byte
	// eofIsEnd: the protocol has no end marker and a body that ends cleanly
	// is a complete answer (Triton). A body cut by the connection surfaces
	// as io.ErrUnexpectedEOF from net/http, never as io.EOF, so this does
	// not take a cut stream for a whole one.
	eofIsEnd bool
}

// sseDecoder reads SSE events and hands each event's data to a parser.
type sseDecoder struct {
	sse    *sse.Reader
	ev     sse.Event
	parser frameParser
	sseEnd
	ended bool // the synthetic end frame of eofIsEnd was returned
	final bool // the current frame is the synthetic end frame
	last  bool // the current frame was complete but for its blank line
}

func (d *sseDecoder) Next() error {
	d.final = false
	if d.last {
		// The previous frame was the body's last; nothing can follow it.
		d.last = false
		if d.eofIsEnd && !d.ended {
			d.ended, d.final = true, true
			return nil
		}
		return io.EOF
	}
	ev, last, err := readEvent(d.sse, d.mayEnd)
	switch {
	case err == nil:
		d.ev, d.last = ev, last
		return nil
	case err == io.EOF && d.eofIsEnd && !d.ended:
		d.ended, d.final = true, true
		return nil
	}
	return err
}

// mayEnd says whether ev, cut from its blank line by the body's end, is an
// event the stream may end with: data when the protocol has no end marker
// (the Triton documentation's recording ends so), or the end marker.
func (d *sseDecoder) mayEnd(ev sse.Event) bool {
	return len(bytes.TrimSpace(ev.Data)) > 0 && (d.eofIsEnd || d.isDone(ev.Data))
}

// readEvent reads a decoder's next SSE event. An event the body's end cut
// from the blank line that dispatches it comes back with last set when
// mayEnd says the stream may end with it: the server wrote it whole and
// closed the body, which ended cleanly (a cut connection is another error).
// An over-long line or event is a ProtocolError; any other error, io.EOF
// included, comes back as it is.
func readEvent(r *sse.Reader, mayEnd func(sse.Event) bool) (ev sse.Event, last bool, err error) {
	ev, err = r.Next()
	switch {
	case err == io.ErrUnexpectedEOF && mayEnd(ev):
		return ev, true, nil
	case errors.Is(err, sse.ErrLineTooLong), errors.Is(err, sse.ErrEventTooLong):
		return ev, false, &ProtocolError{Msg: "reading event", Err: err}
	}
	return ev, false, err
}

func (d *sseDecoder) isDone(data []byte) bool {
	return d.doneMarker != nil && bytes.Equal(bytes.TrimSpace(data), d.doneMarker)
}

func (d *sseDecoder) Decode(c *Chunk) error {
	if d.final {
		c.Done = true
		return nil
	}
	switch d.ev.Name {
	case "message":
	case "error":
		return &ProtocolError{Msg: "error event: " + excerpt(d.ev.Data)}
	default:
		return nil // an event type this API does not define
	}
	if d.isDone(d.ev.Data) {
		c.Done = true
		return nil
	}
	return d.parser.parse(d.ev.Data, c)
}

// decodeJSON unmarshals one frame, turning a syntax or type error into a
// ProtocolError that quotes the frame.
func decodeJSON(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return &ProtocolError{Msg: "malformed frame " + excerpt(data), Err: err}
	}
	return nil
}

// serverError reports an "error" member of a frame, whatever its shape
// (a string, or an object with a message), as a ProtocolError. A null or
// absent error is no error.
func serverError(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	return &ProtocolError{Msg: "server reported an error: " + excerpt(raw)}
}

// setUsage sets the server's counts of a frame's output and prompt
// tokens (out and prompt, named outName and promptName in its API),
// each validated.
func (c *Chunk) setUsage(outName string, out *int64, promptName string, prompt *int64) error {
	n, err := count(outName, out)
	if err != nil {
		return err
	}
	pn, err := count(promptName, prompt)
	if err != nil {
		return err
	}
	c.HasUsage, c.CompletionTokens, c.PromptTokens = true, n, pn
	return nil
}

// frameError is a frame's "error" member, which every native API sends
// in some shape (serverError).
type frameError struct {
	Error json.RawMessage `json:"error"`
}

func (e *frameError) serverError() error { return serverError(e.Error) }

// decodeFrame decodes one frame into f, cleared first, and reports the
// error the server put in it.
func decodeFrame[F any, P interface {
	*F
	serverError() error
}](data []byte, f P) error {
	*f = *new(F)
	if err := decodeJSON(data, f); err != nil {
		return err
	}
	return f.serverError()
}

// newFrameDecoder reads a native API's SSE stream with p, ending as end
// says, or a single JSON body when the server ignored "stream": true and
// answered application/json.
func newFrameDecoder(body io.Reader, header http.Header, maxLineBytes int, p frameParser, end sseEnd) Decoder {
	if isJSON(header.Get("Content-Type")) {
		return newBodyDecoder(body, maxLineBytes, p)
	}
	return &sseDecoder{sse: sse.NewReader(body, maxLineBytes), parser: p, sseEnd: end}
}

// setSamplingIn sets temperature and top_p in m (a body, or the member of
// one that holds its sampling parameters), and the seed as seedKey ("":
// not sent), each only when set.
func setSamplingIn(m map[string]any, r *Request, seedKey string) {
	if r.Temperature != nil {
		m["temperature"] = *r.Temperature
	}
	if r.TopP != nil {
		m["top_p"] = *r.TopP
	}
	if r.Seed != nil && seedKey != "" {
		m[seedKey] = *r.Seed
	}
}

// count validates a server token count.
func count(name string, v *int64) (int, error) {
	if v == nil {
		return 0, nil
	}
	if *v < 0 || *v > maxCount {
		return 0, &ProtocolError{Msg: fmt.Sprintf("%s %d is not a token count", name, *v)}
	}
	return int(*v), nil
}

// newNativeRequest is newJSONRequest for a native API.
func newNativeRequest(ctx context.Context, t *Target, url string, body *body, accept string) (*http.Request, error) {
	req, err := newJSONRequest(ctx, t, url, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	return req, nil
}
