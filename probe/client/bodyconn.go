package client

import (
	"io"
	"net"
)

// bodyConn is a connection that writes a request body held in memory in
// one system call. net/http copies a body of known length through
// io.LimitReader, which the connection's own ReadFrom copies through a new
// 32 KiB buffer, one write per 32 KiB: for a 65 kB body (a 12k-token
// prompt) three writes and a 32 KiB allocation per request, and the
// allocations bring on collections whose assists delay the senders of a
// group of rows due at one instant.
type bodyConn struct{ net.Conn }

// ReadFrom writes a body that can write itself (bytes.Buffer, the flavors'
// bodies, behind net/http's wrappers) in one write, held to the length
// net/http gave; any other reader is copied as the connection would.
func (c bodyConn) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if wt, ok := lr.R.(io.WriterTo); ok {
			lw := &limitedWriter{w: c.Conn, left: lr.N}
			n, err := wt.WriteTo(lw)
			lr.N -= n
			return n, err
		}
	}
	return io.Copy(c.Conn, r)
}

// limitedWriter writes at most left bytes to w; a longer write is cut
// there and reported short, as io.LimitReader would have stopped reading.
type limitedWriter struct {
	w    io.Writer
	left int64
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	short := int64(len(p)) > l.left
	if short {
		p = p[:l.left]
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	if err == nil && short {
		err = io.ErrShortWrite
	}
	return n, err
}
