package h1

import (
	"crypto/tls"
	"syscall"

	"golang.org/x/sys/unix"
)

// alive says whether an idle connection is still open and quiet: one
// non-blocking peek at its socket. No goroutine reads an idle connection
// (net/http's read loop would see the server's close), so a close that
// came while it was idle is found here, before a request is written on it.
// Bytes waiting on an idle connection (a TLS alert, a stray answer) make
// it unusable too.
func alive(c *conn) bool {
	raw := c.Conn
	if tc, ok := raw.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	sc, ok := raw.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		// Nothing to read: open and quiet. A byte, or end of file: not.
		open = err == unix.EAGAIN || err == unix.EWOULDBLOCK
		return true
	})
	return err == nil && open
}
