package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

// errNoAnswer: the connection ended before the first byte of a response.
var errNoAnswer = errors.New("h1: server closed the connection before answering")

// readLine reads one line of a head, without its CRLF (a bare LF is
// taken as one), charging its bytes to *budget: a head longer than the
// budget, or a line longer than limit, is an error, never a larger buffer.
func readLine(br *bufio.Reader, budget *int, limit int) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// Longer than the read buffer: gather it, to the bounds.
		long := append([]byte(nil), line...)
		for err == bufio.ErrBufferFull {
			if len(long) > limit || len(long) > *budget {
				return nil, protoErr("line longer than %d bytes", min(limit, *budget))
			}
			line, err = br.ReadSlice('\n')
			long = append(long, line...)
		}
		line = long
	}
	if len(line) > limit || len(line) > *budget {
		return nil, protoErr("line longer than %d bytes", min(limit, *budget))
	}
	*budget -= len(line)
	if err != nil {
		if err == io.EOF && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// readResponse reads the response head (skipping 1xx answers) and frames
// its body. The 1xx answers are not counted: their heads are charged to the
// one budget of the final answer's head (maxHeaderBytes), as net/http
// charges them when no one asked to see them, so that both read any number
// of interim answers that fit in it and refuse the same ones that do not.
// silent says, with an error, that not one byte of an answer was read.
func (t *Transport) readResponse(c *conn, req *http.Request) (resp *http.Response, silent bool, err error) {
	budget := t.maxHeaderBytes
	for informational := 0; ; informational++ {
		line, err := readLine(c.br, &budget, t.maxHeaderBytes)
		if err != nil {
			// A line over the bounds is refused before it is charged.
			var pe *ProtocolError
			silent := informational == 0 && budget == t.maxHeaderBytes && !errors.As(err, &pe)
			if err == io.EOF && silent {
				return nil, true, errNoAnswer
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, silent, err
		}
		resp, err := parseStatus(line)
		if err != nil {
			return nil, false, err
		}
		if resp.Header, err = readHeader(c.br, &budget, t.maxHeaderBytes); err != nil {
			return nil, false, err
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			if resp.StatusCode == http.StatusSwitchingProtocols {
				// An upgrade nobody asked for: the answer is the 101
				// itself, as net/http returns it, with no body, and the
				// connection, now another protocol's, is closed.
				resp.ContentLength = 0
				resp.Close = true
				resp.Body = &body{c: c, mode: bodyNone}
				return resp, false, nil
			}
			continue
		}
		if err := frame(resp, req, c); err != nil {
			return nil, false, err
		}
		return resp, false, nil
	}
}

// parseStatus reads "HTTP/1.x 200 OK".
func parseStatus(line []byte) (*http.Response, error) {
	proto, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok {
		return nil, protoErr("malformed status line %q", truncate(line))
	}
	var minor int
	switch string(proto) {
	case "HTTP/1.1":
		minor = 1
	case "HTTP/1.0":
		minor = 0
	default:
		return nil, protoErr("malformed status line %q", truncate(line))
	}
	code, reason, _ := bytes.Cut(rest, []byte(" "))
	if len(code) != 3 {
		return nil, protoErr("malformed status code %q", truncate(code))
	}
	n := 0
	for _, d := range code {
		if d < '0' || d > '9' {
			return nil, protoErr("malformed status code %q", truncate(code))
		}
		n = n*10 + int(d-'0')
	}
	if n < 100 {
		return nil, protoErr("malformed status code %q", truncate(code))
	}
	return &http.Response{
		Status:     strconv.Itoa(n) + " " + string(reason),
		StatusCode: n,
		Proto:      string(proto),
		ProtoMajor: 1,
		ProtoMinor: minor,
	}, nil
}

func truncate(b []byte) string {
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// readHeader reads header fields up to the empty line.
func readHeader(br *bufio.Reader, budget *int, limit int) (http.Header, error) {
	h := make(http.Header, 8)
	var last string
	for {
		line, err := readLine(br, budget, limit)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if len(line) == 0 {
			return h, nil
		}
		if line[0] == ' ' || line[0] == '\t' {
			// An obsolete line folding: its text continues the last
			// field, joined by a space (RFC 9112, section 5.2).
			vs := h[last]
			if last == "" || len(vs) == 0 {
				return nil, protoErr("header continuation before any field")
			}
			if !fieldValue(line) {
				return nil, protoErr("malformed header line %q", truncate(line))
			}
			vs[len(vs)-1] += " " + string(bytes.TrimSpace(line))
			continue
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || !token(k) || !fieldValue(v) {
			return nil, protoErr("malformed header line %q", truncate(line))
		}
		key := canonical(k)
		h[key] = append(h[key], string(bytes.TrimSpace(v)))
		last = key
	}
}

// canonical is k's canonical form, without an allocation for the fields
// every streamed answer carries.
func canonical(k []byte) string {
	switch string(k) {
	case "Content-Type", "content-type":
		return "Content-Type"
	case "Content-Length", "content-length":
		return "Content-Length"
	case "Transfer-Encoding", "transfer-encoding":
		return "Transfer-Encoding"
	case "Connection", "connection":
		return "Connection"
	case "Date", "date":
		return "Date"
	case "Server", "server":
		return "Server"
	case "Keep-Alive", "keep-alive":
		return "Keep-Alive"
	case "Cache-Control", "cache-control":
		return "Cache-Control"
	}
	return textproto.CanonicalMIMEHeaderKey(string(k))
}

// token says whether k is a field name (RFC 9110's token).
func token(k []byte) bool {
	if len(k) == 0 {
		return false
	}
	for _, c := range k {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// fieldValue says whether v may be a field value: no control byte but
// horizontal tab, and no DEL (RFC 9110, section 5.5: a NUL, a bare CR or
// another control is refused, not passed on); obs-text (0x80 and above) is
// allowed. It is net/http's rule (textproto's validHeaderValueByte), so the
// two transports refuse the same answers.
func fieldValue(v []byte) bool {
	for _, c := range v {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// Body framings (RFC 9112, section 6.3).
const (
	bodyNone = iota
	bodyLength
	bodyChunked
	bodyUntilClose
)

// frame decides how resp's body ends and whether its connection can carry
// another request, and gives resp its Body.
func frame(resp *http.Response, req *http.Request, c *conn) error {
	h := resp.Header
	keep := resp.ProtoMinor == 1
	for _, v := range h["Connection"] {
		for _, f := range strings.Split(v, ",") {
			switch strings.ToLower(strings.TrimSpace(f)) {
			case "close":
				keep = false
			case "keep-alive":
				if resp.ProtoMinor == 0 {
					keep = true
				}
			}
		}
	}
	if resp.ProtoMinor == 0 && len(h["Transfer-Encoding"]) > 0 {
		// HTTP/1.0 has no transfer codings: the field is ignored, as
		// net/http does, and the connection not reused (RFC 9112,
		// section 6.1).
		delete(h, "Transfer-Encoding")
		keep = false
	}
	b := &body{c: c}
	resp.ContentLength = -1
	switch {
	case req.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified:
		b.mode = bodyNone
		if resp.StatusCode != http.StatusNotModified || req.Method == http.MethodHead {
			resp.ContentLength = 0
		}
	case len(h["Transfer-Encoding"]) > 0:
		te := strings.ToLower(strings.TrimSpace(strings.Join(h["Transfer-Encoding"], ",")))
		if te != "chunked" {
			return protoErr("unsupported transfer encoding %q", te)
		}
		if len(h["Content-Length"]) > 0 {
			// Both framings: chunked wins, and the connection, whose
			// framing two parties may read differently, is not reused.
			keep = false
			delete(h, "Content-Length")
		}
		b.mode = bodyChunked
		resp.TransferEncoding = []string{"chunked"}
		delete(h, "Transfer-Encoding")
	case len(h["Content-Length"]) > 0:
		n, err := contentLength(h["Content-Length"])
		if err != nil {
			return err
		}
		b.mode, b.left = bodyLength, n
		resp.ContentLength = n
	default:
		if resp.ProtoMinor == 1 && resp.StatusCode >= 200 {
			// HTTP/1.1 without a length: the body runs to the close.
			keep = false
		}
		b.mode = bodyUntilClose
		keep = false
	}
	if b.mode == bodyLength && b.left == 0 {
		b.mode = bodyNone
	}
	b.keep = keep
	resp.Close = !keep
	if b.mode == bodyNone {
		resp.Body = b // read as empty; finished by exchange
		return nil
	}
	b.r = c.br
	resp.Body = b
	return nil
}

// contentLength parses the Content-Length values, which must agree.
func contentLength(vs []string) (int64, error) {
	var n int64 = -1
	for _, v := range vs {
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			m, err := strconv.ParseInt(f, 10, 64)
			if err != nil || m < 0 || f == "" || f[0] == '+' {
				return 0, protoErr("malformed Content-Length %q", v)
			}
			if n >= 0 && m != n {
				return 0, protoErr("conflicting Content-Length values %q", strings.Join(vs, ", "))
			}
			n = m
		}
	}
	return n, nil
}

// body is a response body read on the caller's goroutine from the
// connection's buffer.
type body struct {
	c    *conn
	r    *bufio.Reader // nil: no body
	mode int
	left int64 // bodyLength: bytes left; bodyChunked: bytes left of this chunk
	// crlf: the chunk's data was read and its CRLF not yet.
	crlf bool
	keep bool
	done bool // read to its end, or closed
	err  error

	t   *Transport
	w   *watch
	ctx context.Context
	// wr is the request's write when it runs beside the answer's read
	// (a body over oneWrite); nil when it ended before the read began.
	wr *reqWriter
}

func (b *body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.r == nil || len(p) == 0 {
		if b.r == nil {
			return 0, io.EOF
		}
		return 0, nil
	}
	var n int
	var err error
	switch b.mode {
	case bodyLength:
		n, err = b.r.Read(p[:min(int64(len(p)), b.left)])
		b.left -= int64(n)
		if b.left == 0 {
			err = io.EOF
		} else if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
	case bodyChunked:
		n, err = b.readChunked(p)
	case bodyUntilClose:
		n, err = b.r.Read(p)
	}
	if err != nil {
		b.fail(err)
	}
	return n, b.err
}

// readChunked fills p with chunk data: from the chunk in hand, then from
// the next ones while their size lines are already buffered, so that a
// read never waits for bytes the server has not sent while it has some
// to return.
func (b *body) readChunked(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if b.crlf {
			if n > 0 && b.r.Buffered() < 2 {
				return n, nil
			}
			// Byte by byte: a [2]byte handed to io.ReadFull escapes, one
			// allocation a chunk.
			for _, want := range [2]byte{'\r', '\n'} {
				c, err := b.r.ReadByte()
				if err != nil {
					return n, unexpected(err)
				}
				if c != want {
					return n, protoErr("malformed chunked encoding: no CRLF after a chunk's data")
				}
			}
			b.crlf = false
		}
		if b.left == 0 {
			if n > 0 && !lineBuffered(b.r) {
				return n, nil
			}
			size, err := b.chunkSize()
			if err != nil {
				return n, err
			}
			if size == 0 {
				if err := b.trailers(); err != nil {
					return n, err
				}
				return n, io.EOF
			}
			b.left = size
		}
		if n > 0 && b.r.Buffered() == 0 {
			return n, nil
		}
		m, err := b.r.Read(p[n:min(int64(len(p)), int64(n)+b.left)])
		n += m
		b.left -= int64(m)
		if b.left == 0 {
			b.crlf = true
		}
		if err != nil {
			return n, unexpected(err)
		}
	}
	return n, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// lineBuffered says whether a whole line is in r's buffer.
func lineBuffered(r *bufio.Reader) bool {
	buf, _ := r.Peek(r.Buffered())
	return bytes.IndexByte(buf, '\n') >= 0
}

// chunkSize reads a chunk's size line; extensions are ignored.
func (b *body) chunkSize() (int64, error) {
	budget := maxChunkLine
	line, err := readLine(b.r, &budget, maxChunkLine)
	if err != nil {
		return 0, unexpected(err)
	}
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	line = bytes.TrimRight(line, " \t")
	if len(line) == 0 || len(line) > 16 {
		return 0, protoErr("malformed chunk size %q", truncate(line))
	}
	var n int64
	for _, c := range line {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, protoErr("malformed chunk size %q", truncate(line))
		}
		n = n<<4 | int64(d)
	}
	if n < 0 || n > 1<<62 {
		return 0, protoErr("chunk size %q out of range", truncate(line))
	}
	return n, nil
}

// trailers reads and drops the trailer fields after the last chunk. They
// are held to the head's form (a token, a colon, a field value without
// control bytes; a continuation only after a field), as net/http holds
// them, so that the two refuse the same bodies.
func (b *body) trailers() error {
	budget := b.t.maxHeaderBytes
	seen := false
	for {
		line, err := readLine(b.r, &budget, maxChunkLine)
		if err != nil {
			return unexpected(err)
		}
		if len(line) == 0 {
			return nil
		}
		if line[0] == ' ' || line[0] == '\t' {
			if !seen || !fieldValue(line) {
				return protoErr("malformed trailer line %q", truncate(line))
			}
			continue
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || !token(k) || !fieldValue(v) {
			return protoErr("malformed trailer line %q", truncate(line))
		}
		seen = true
	}
}

// fail ends the body with err: io.EOF when it was read to its end (the
// connection goes back to the pool when it may), anything else closes the
// connection.
func (b *body) fail(err error) {
	if err == io.EOF {
		if b.mode == bodyUntilClose {
			b.keep = false
		}
		b.err = io.EOF
		b.finish()
		return
	}
	if b.w != nil {
		err = b.w.err(b.ctx, err)
	}
	b.err = err
	b.keep = false
	b.finish()
}

// finish releases the connection once: to the pool when the body ended
// cleanly, may be kept, and the context never touched it; closed
// otherwise.
func (b *body) finish() {
	if b.done {
		return
	}
	b.done = true
	if b.err == nil {
		b.err = io.EOF
	}
	untouched := b.w.done()
	keep := b.keep && untouched && b.err == io.EOF
	if b.wr != nil && keep && !b.wr.wrote() {
		// The request was not written whole (an early answer): the
		// server is out of step with the connection.
		keep = false
	}
	if keep {
		b.t.put(b.c)
		return
	}
	_ = b.c.Close()
	if b.wr != nil {
		// The close ends the write: nothing of the request is used
		// once its body is done with.
		b.wr.wait()
	}
}

// Close ends the body: a body not read to its end closes its connection.
func (b *body) Close() error {
	if !b.done {
		b.keep = false
		b.err = errClosed
		b.finish()
	}
	return nil
}

var errClosed = errors.New("h1: read on a closed body")
