package client

import (
	"context"
	"net"
	"net/url"
	"sync"
	"time"
)

// Warm-up bounds: at most maxWarm connections are opened ahead, and one
// not taken within warmTTL is closed (a server may close a connection that
// carries no request after a few seconds; uvicorn's keep-alive timeout is
// 5 s).
const (
	maxWarm = 256
	warmTTL = time.Second
)

// Warm opens up to n connections to t's server ahead of need and keeps
// them for the client's next dials, so that a group of requests due at one
// instant (a replay's rows on one millisecond) finds its connections open:
// otherwise the first group dials them all at its instant, and on 16 cores
// its last sends were 1.1-2.4 ms late against 0.5-1.0 ms for the later
// groups. It returns how many it opened; a client built with
// Options.Transport opens none. Warm is safe for concurrent use.
func (c *Client) Warm(ctx context.Context, t *Target, n int) int {
	if c.stash == nil || n <= 0 {
		return 0
	}
	addr, err := dialAddr(t.BaseURL)
	if err != nil {
		return 0
	}
	n = min(n, maxWarm)
	// A connection that takes longer than warmTTL to open is not ahead of
	// anything; and the caller may wait for Warm.
	ctx, cancel := context.WithTimeout(ctx, warmTTL)
	defer cancel()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		opened int
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := c.dial(ctx, "tcp", addr)
			if err != nil {
				return
			}
			c.stash.put(addr, conn)
			mu.Lock()
			opened++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return opened
}

// dialAddr is the host:port net/http dials for baseURL.
func dialAddr(baseURL string) (string, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return "", err
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// connStash holds the connections Warm opened until a dial takes them.
// Those past warmTTL are closed at the next dial or at Close: at most
// maxWarm per Warm, and a replay's first group takes them within
// workload.ReplayLead.
type connStash struct {
	mu    sync.Mutex
	conns map[string][]warmConn
}

type warmConn struct {
	conn   net.Conn
	expiry time.Time
}

func (s *connStash) put(addr string, conn net.Conn) {
	s.mu.Lock()
	if s.conns == nil {
		s.conns = map[string][]warmConn{}
	}
	s.conns[addr] = append(s.conns[addr], warmConn{conn, time.Now().Add(warmTTL)})
	s.mu.Unlock()
}

// take returns a kept connection to addr, or nil.
func (s *connStash) take(addr string) net.Conn {
	s.expire(time.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.conns[addr]
	if len(cs) == 0 {
		return nil
	}
	conn := cs[len(cs)-1].conn
	s.conns[addr] = cs[:len(cs)-1]
	return conn
}

// expire closes the connections kept past their time.
func (s *connStash) expire(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for addr, cs := range s.conns {
		kept := cs[:0]
		for _, c := range cs {
			if now.Before(c.expiry) {
				kept = append(kept, c)
			} else {
				_ = c.conn.Close()
			}
		}
		if len(kept) == 0 {
			delete(s.conns, addr)
		} else {
			s.conns[addr] = kept
		}
	}
}

// close closes every kept connection.
func (s *connStash) close() { s.expire(time.Now().Add(2 * warmTTL)) }

// kept is how many connections are kept (for tests).
func (s *connStash) kept() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, cs := range s.conns {
		n += len(cs)
	}
	return n
}
