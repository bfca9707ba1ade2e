package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/infer-exporter/infer_exporter/probe/client"
)

// The transports the scaling scenarios compare (-transports): net/http, as
// the exporter has always sent; probe/client/h1, the minimal client on
// net.Conn; and fasthttp with streamed response bodies, a maintained
// library made for many connections.
const (
	transportNetHTTP  = client.WireNetHTTP
	transportH1       = client.WireH1
	transportFasthttp = "fasthttp"
)

func validTransport(s string) bool {
	return s == transportNetHTTP || s == transportH1 || s == transportFasthttp
}

// clientOptions sets a workload client's transport.
func clientOptions(transport string) func(o *client.Options) {
	return func(o *client.Options) {
		switch transport {
		case transportNetHTTP, "":
			o.Wire = client.WireNetHTTP
		case transportH1:
			o.Wire = client.WireH1
		case transportFasthttp:
			o.Transport = newFastTransport(o.MaxConnsPerHost)
		}
	}
}

// fastTransport sends through one fasthttp.HostClient per server, its
// response bodies streamed. fasthttp takes no context: a request's
// cancellation is seen at its body's next read (the reference server
// writes a token at least every step), which is all the harness needs.
type fastTransport struct {
	maxIdle int
	hosts   sync.Map // host:port -> *fasthttp.HostClient
}

func newFastTransport(maxIdle int) *fastTransport { return &fastTransport{maxIdle: maxIdle} }

func (f *fastTransport) host(addr string) *fasthttp.HostClient {
	if hc, ok := f.hosts.Load(addr); ok {
		return hc.(*fasthttp.HostClient)
	}
	hc, _ := f.hosts.LoadOrStore(addr, &fasthttp.HostClient{
		Addr: addr,
		// No cap: the in-flight cap is the caller's, as with net/http.
		MaxConns:                 1 << 30,
		MaxIdleConnDuration:      90 * time.Second,
		StreamResponseBody:       true,
		NoDefaultUserAgentHeader: true,
		// 1 KiB each way, as the client's net/http transport: the
		// memory per stream is compared.
		ReadBufferSize:  1 << 10,
		WriteBufferSize: 1 << 10,
	})
	return hc.(*fasthttp.HostClient)
}

func (f *fastTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	req := fasthttp.AcquireRequest()
	req.SetRequestURI(r.URL.String())
	req.Header.SetMethod(r.Method)
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if r.Host != "" {
		req.Header.SetHost(r.Host)
	}
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			fasthttp.ReleaseRequest(req)
			return nil, err
		}
		req.SetBodyRaw(b)
	}
	resp := fasthttp.AcquireResponse()
	err := f.host(r.URL.Host).Do(req, resp)
	fasthttp.ReleaseRequest(req)
	if err != nil {
		fasthttp.ReleaseResponse(resp)
		return nil, err
	}
	h := make(http.Header, 8)
	for k, v := range resp.Header.All() {
		h.Add(string(k), string(v))
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", resp.StatusCode(), http.StatusText(resp.StatusCode())), StatusCode: resp.StatusCode(),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, ContentLength: -1, Request: r,
		Body: &fastBody{resp: resp, r: resp.BodyStream(), done: ctx.Done(), ctxErr: ctx.Err},
	}, nil
}

func (f *fastTransport) CloseIdleConnections() {
	f.hosts.Range(func(_, v any) bool {
		v.(*fasthttp.HostClient).CloseIdleConnections()
		return true
	})
}

// fastBody is a streamed fasthttp body as net/http's.
type fastBody struct {
	resp   *fasthttp.Response
	r      io.Reader
	done   <-chan struct{}
	ctxErr func() error
	eof    bool
	closed bool
}

func (b *fastBody) Read(p []byte) (int, error) {
	select {
	case <-b.done:
		return 0, b.ctxErr()
	default:
	}
	if b.r == nil {
		return 0, io.EOF
	}
	n, err := b.r.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof = true
	}
	return n, err
}

var errBodyClosed = errors.New("body closed before its end")

func (b *fastBody) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	if b.r != nil && !b.eof {
		// Not read to its end: the connection is closed, not drained.
		if c, ok := b.r.(fasthttp.ReadCloserWithError); ok {
			_ = c.CloseWithError(errBodyClosed)
		}
	} else {
		_ = b.resp.CloseBodyStream()
	}
	fasthttp.ReleaseResponse(b.resp)
	return nil
}

// transportList parses -transports.
func transportList(dst *[]string) func(string) error {
	return func(v string) error {
		var out []string
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			if !validTransport(f) {
				return fmt.Errorf("transport %q: one of %s, %s, %s", f, transportNetHTTP, transportH1, transportFasthttp)
			}
			out = append(out, f)
		}
		*dst = out
		return nil
	}
}
