// Package ndjson reads newline-delimited JSON (NDJSON, also called JSON
// Lines), as Ollama streams its native API: one JSON value per line, lines
// ended by "\n" (a "\r" before it is dropped), blank lines ignored.
//
// It has the contract of probe/sse's Reader: lines are bounded by
// maxLineBytes so that a misbehaving server cannot make the reader allocate
// without limit; Next does not read ahead of the line it returns, so the
// instant Next returns is the instant the line's last byte was available;
// and the returned slice aliases a buffer that the next call overwrites, so
// reading a stream does not allocate per line.
package ndjson

import (
	"bytes"
	"errors"
	"io"
)

// ErrLineTooLong is returned when a line exceeds the reader's maxLineBytes.
// It is final: every later call returns it again.
var ErrLineTooLong = errors.New("ndjson: line too long")

// maxEmptyReads is how many consecutive (0, nil) reads are tolerated before
// giving up with io.ErrNoProgress, as bufio does.
const maxEmptyReads = 100

// initialBufBytes is the first size of the read buffer: an Ollama token
// line is about 120 bytes.
const initialBufBytes = 4096

// Reader reads lines of an NDJSON stream. It is not safe for concurrent use.
type Reader struct {
	src        io.Reader
	maxLine    int
	buf        []byte // buf[start:end] is unconsumed input
	start, end int
	readErr    error
	sticky     error
}

// NewReader returns a Reader of r that refuses lines longer than
// maxLineBytes (not counting the terminator). maxLineBytes below 1 is
// treated as 1.
func NewReader(r io.Reader, maxLineBytes int) *Reader {
	if maxLineBytes < 1 {
		maxLineBytes = 1
	}
	return &Reader{src: r, maxLine: maxLineBytes, buf: make([]byte, min(initialBufBytes, maxLineBytes+1))}
}

// Next returns the next non-blank line, without its terminator. The slice is
// valid until the next call.
//
// At the end of the input it returns io.EOF if the stream ended after a
// line terminator (or after blank lines only). If the stream ended inside a
// line, it returns that line together with io.ErrUnexpectedEOF: the caller
// decides whether a final line without its newline is complete (a server
// that omits the last newline) or cut. A read error from the underlying
// reader is returned as is, after every line already complete in the
// buffer.
func (r *Reader) Next() ([]byte, error) {
	if r.sticky != nil {
		return nil, r.sticky
	}
	for {
		if r.end > r.start {
			rest := r.buf[r.start:r.end]
			if i := bytes.IndexByte(rest, '\n'); i >= 0 {
				line := bytes.TrimSuffix(rest[:i], []byte{'\r'})
				if len(line) > r.maxLine {
					r.sticky = ErrLineTooLong
					return nil, r.sticky
				}
				r.start += i + 1
				if len(bytes.TrimSpace(line)) == 0 {
					continue
				}
				return line, nil
			}
			if len(rest) > r.maxLine+1 {
				r.sticky = ErrLineTooLong
				return nil, r.sticky
			}
		}
		if r.readErr != nil {
			rest := r.buf[r.start:r.end]
			r.start = r.end
			if r.readErr == io.EOF && len(bytes.TrimSpace(rest)) > 0 {
				line := bytes.TrimSuffix(rest, []byte{'\r'})
				if len(line) > r.maxLine {
					r.sticky = ErrLineTooLong
					return nil, r.sticky
				}
				return line, io.ErrUnexpectedEOF
			}
			return nil, r.readErr
		}
		r.fill()
	}
}

// fill reads more input, compacting the buffer first and growing it up to
// maxLine+2 bytes (a full line, a "\r" and one more byte to tell that it is
// too long).
func (r *Reader) fill() {
	if r.start > 0 {
		n := copy(r.buf, r.buf[r.start:r.end])
		r.start, r.end = 0, n
	}
	if r.end == len(r.buf) {
		nb := make([]byte, min(2*len(r.buf), r.maxLine+2))
		copy(nb, r.buf[:r.end])
		r.buf = nb
	}
	for range maxEmptyReads {
		n, err := r.src.Read(r.buf[r.end:])
		if n < 0 || n > len(r.buf)-r.end {
			r.readErr = errors.New("ndjson: reader returned an invalid count")
			return
		}
		r.end += n
		if err != nil {
			r.readErr = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.readErr = io.ErrNoProgress
}
