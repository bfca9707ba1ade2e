package client

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
)

// A request's body is held in pieces: the bytes built for the request
// alone, and between them the bytes of its workload's images, which every
// request of the workload shares and none copies. A request holds its
// body while it is in flight, until its answer ends: a body encoded as one
// slice copied the images into each request, and 16 images of 591x591
// (some 21 MB of base64) with 64 requests in flight against a server that
// never answered held 2.5 GB. With the images shared, a request in flight
// holds its prompt and a few hundred bytes of framing beside them
// (docs/limits.md, "Images"). The transports write the pieces as they
// are: probe/client/h1 in one vectored write (Pieces), net/http through
// bodyConn (WriteTo).

// Image is one image, encoded once for every request that carries it. Its
// bytes are read only; NewImage builds it.
type Image struct {
	// dataURL is "data:<media type>;base64,<the bytes in base64>"; the
	// base64 alone, which Ollama takes, is its tail from b64.
	dataURL []byte
	b64     int
}

// NewImage encodes data, an image of the media type mediaType (such as
// "image/png": a token without quotes or backslashes, written into JSON
// strings as it is), once: its data URL and its base64 share one buffer.
func NewImage(mediaType string, data []byte) Image {
	prefix := "data:" + mediaType + ";base64,"
	url := make([]byte, len(prefix)+base64.StdEncoding.EncodedLen(len(data)))
	copy(url, prefix)
	base64.StdEncoding.Encode(url[len(prefix):], data)
	return Image{dataURL: url, b64: len(prefix)}
}

// DataURL is the image as a data URL; the caller must not modify it.
func (im Image) DataURL() []byte { return im.dataURL }

// Base64 is the image's bytes in standard base64; the caller must not
// modify it.
func (im Image) Base64() []byte { return im.dataURL[im.b64:] }

// Bytes is the memory the image holds.
func (im Image) Bytes() int { return len(im.dataURL) }

// body is a request body: its pieces in order, some of them shared.
type body struct {
	pieces [][]byte
	size   int // the bytes of every piece
	own    int // the bytes built for this request alone
}

// oneBody is a body of one piece of the request's own.
func oneBody(b []byte) *body { return &body{pieces: [][]byte{b}, size: len(b), own: len(b)} }

// bytes joins the pieces (tests, and messages about a body).
func (b *body) bytes() []byte { return bytes.Join(b.pieces, nil) }

// reader returns a new reader of b: a request's body and its GetBody's.
func (b *body) reader() *bodyReader { return &bodyReader{pieces: b.pieces} }

// bodyReader reads a body's pieces without copying them anywhere but into
// the caller's buffer; it never modifies them, so that any number of
// readers of one body (a request retried) may read at once.
type bodyReader struct {
	pieces [][]byte
	i, off int // the next byte: pieces[i][off]
}

func (r *bodyReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && r.i < len(r.pieces) {
		c := copy(p[n:], r.pieces[r.i][r.off:])
		n += c
		r.off += c
		if r.off == len(r.pieces[r.i]) {
			r.i, r.off = r.i+1, 0
		}
	}
	if n == 0 && len(p) > 0 && r.i == len(r.pieces) {
		return 0, io.EOF
	}
	return n, nil
}

// WriteTo writes the pieces left, each as it is: net/http's connection
// (bodyConn.ReadFrom) takes the body this way.
func (r *bodyReader) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for r.i < len(r.pieces) {
		m, err := w.Write(r.pieces[r.i][r.off:])
		n += int64(m)
		r.off += m
		if err != nil {
			return n, err
		}
		r.i, r.off = r.i+1, 0
	}
	return n, nil
}

// Pieces returns the pieces left unread and reads them all: probe/client/h1
// writes them as they are (h1.Pieces). The pieces are read only.
func (r *bodyReader) Pieces() [][]byte {
	rest := r.pieces[min(r.i, len(r.pieces)):]
	if r.off > 0 {
		rest = append([][]byte{rest[0][r.off:]}, rest[1:]...)
	}
	r.i, r.off = len(r.pieces), 0
	return rest
}

func (r *bodyReader) Close() error { return nil }

// imageShape writes the value of the body member that carries a
// request's images, and its prompt when the flavor's API holds them
// together, in the flavor's shape (each flavor's file has its own).
type imageShape func(w *bodyWriter, prompt string, images []Image) error

// withImages is a body member that carries the images: a flavor sets it in
// its body's map where its API takes them, so that Extra, merged last, may
// still replace it as it replaces any member, and encodeJSON writes it in
// pieces around the shared images.
type withImages struct {
	shape  imageShape
	prompt string
	images []Image
}

// encodeJSON encodes m, a body built of maps, strings, numbers and raw
// JSON, and at most one withImages member, which is written first and in
// pieces; the rest is one piece, as encoding/json writes it (the member's
// place in the object means nothing to JSON).
func encodeJSON(name string, m map[string]any) (*body, error) {
	var key string
	var im *withImages
	for k, v := range m {
		if w, ok := v.(*withImages); ok {
			key, im = k, w
			delete(m, k)
			break
		}
	}
	rest, err := marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding %s request body: %w", name, err)
	}
	if im == nil {
		return oneBody(rest), nil
	}
	var w bodyWriter
	w.raw("{")
	if err := w.json(key); err != nil {
		return nil, fmt.Errorf("encoding %s request body: %w", name, err)
	}
	w.raw(":")
	if err := im.shape(&w, im.prompt, im.images); err != nil {
		return nil, fmt.Errorf("encoding %s request body: %w", name, err)
	}
	if rest = bytes.TrimSpace(rest); len(rest) > 2 {
		// rest is {...}: its members follow the images'.
		w.raw(",")
		w.own.Write(rest[1:])
	} else {
		w.raw("}")
	}
	w.raw("\n")
	return w.body(), nil
}

// marshal encodes v as the request bodies are: the prompt's bytes as they
// are (no HTML escapes), ending in a newline.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// bodyWriter builds a body: the request's own bytes, and the shared pieces
// to go between them.
type bodyWriter struct {
	own    bytes.Buffer
	shares []share
}

// share is a shared piece and where it goes among the own bytes.
type share struct {
	at int
	b  []byte
}

func (w *bodyWriter) raw(s string) { w.own.WriteString(s) }

func (w *bodyWriter) shared(b []byte) { w.shares = append(w.shares, share{at: w.own.Len(), b: b}) }

// json writes v encoded, without encoding/json's newline.
func (w *bodyWriter) json(v any) error {
	b, err := marshal(v)
	if err != nil {
		return err
	}
	w.own.Write(bytes.TrimSuffix(b, []byte("\n")))
	return nil
}

// base64s writes the images' base64 as a JSON array of strings.
func (w *bodyWriter) base64s(images []Image) {
	w.raw("[")
	for i, img := range images {
		if i > 0 {
			w.raw(",")
		}
		w.raw(`"`)
		w.shared(img.Base64())
		w.raw(`"`)
	}
	w.raw("]")
}

func (w *bodyWriter) body() *body {
	own := w.own.Bytes()
	b := &body{pieces: make([][]byte, 0, 2*len(w.shares)+1), own: len(own)}
	from := 0
	for _, s := range w.shares {
		if s.at > from {
			b.pieces = append(b.pieces, own[from:s.at])
		}
		b.pieces = append(b.pieces, s.b)
		from = s.at
	}
	if from < len(own) {
		b.pieces = append(b.pieces, own[from:])
	}
	for _, p := range b.pieces {
		b.size += len(p)
	}
	return b
}
