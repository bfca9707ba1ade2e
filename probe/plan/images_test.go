package plan

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/observation"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
)

// TestImagesSharedInFlight: requests in flight share their workload's
// images instead of each holding a copy. A server reads every request's
// body whole and never answers, so that the requests stay in flight; once
// it has read all of them, the live heap is measured after a collection
// (no timing, no sampling). Each request carries 4 PNG images of 256x256
// (some 0.9 MB of base64); 32 requests that each held their own body held
// 32 times that and more (29 to 33 MB before the images were shared).
// Shared, a request in flight
// holds its prompt, its framing and its connection's buffers, some 30 KB
// with both ends of the connection in this process: the bound is a
// quarter of the images a request, eight times that and a quarter of what
// a copy costs. Every flavor that sends images, prepared ahead (as the
// workloads' runner does) and built at the send (as Ollama's are), on both
// transports.
func TestImagesSharedInFlight(t *testing.T) {
	const inFlight = 32
	for _, flavor := range []string{"openai-chat", "openai-responses", "ollama-chat", "ollama-generate"} {
		for _, wire := range []string{client.WireH1, client.WireNetHTTP} {
			t.Run(flavor+" "+wire, func(t *testing.T) {
				read := make(chan struct{}, inFlight)
				release := make(chan struct{})
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if _, err := io.Copy(io.Discard, r.Body); err != nil {
						return
					}
					read <- struct{}{}
					select {
					case <-r.Context().Done():
					case <-release:
					}
				}))
				defer srv.Close()
				defer close(release)

				c := kindsConfig(t, srv.URL, flavor, "    images: {count: 4, width: 256, height: 256}\n")
				k, err := NewKinds(&c.Workloads[0].Kinds)
				if err != nil {
					t.Fatal(err)
				}
				target, err := client.TargetOf(&c.Targets[0])
				if err != nil {
					t.Fatal(err)
				}
				probe := Template{Kinds: k}.Request(prompt.Prompt{Text: "hello", OutputTokens: 4})
				imageBytes := 0
				for _, im := range probe.Attach.Images {
					imageBytes += len(im.DataURL())
				}
				cl := client.New(client.Options{MaxConnsPerHost: inFlight, Wire: wire})
				defer cl.Close()
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				defer wg.Wait()
				defer cancel()

				before := liveHeap()
				reqs := make([]*client.Request, inFlight)
				for i := range reqs {
					reqs[i] = Template{Kinds: k}.Request(prompt.Prompt{Text: fmt.Sprintf("hello %d", i), OutputTokens: 4})
					client.Prepare(target, reqs[i])
				}
				obs := make([]observation.Request, inFlight)
				for i := range reqs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						cl.Do(ctx, target, reqs[i], &obs[i])
					}()
				}
				for range inFlight {
					<-read
				}
				held := int64(liveHeap()) - int64(before)
				runtime.KeepAlive(reqs)
				if limit := int64(inFlight * imageBytes / 4); held > limit {
					t.Errorf("%d requests in flight, each with %d bytes of images, hold %d bytes (%d a request): more than %d, a quarter of the images a request: each holds a copy of them",
						inFlight, imageBytes, held, held/inFlight, limit)
				}
				t.Logf("%d requests in flight with %d bytes of images each: %d bytes held, %d a request", inFlight, imageBytes, held, held/inFlight)
			})
		}
	}
}

// liveHeap is the bytes of live heap objects, after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestImageCache: Kinds built through one cache that ask for the same
// images share one encoding of them, others get their own; images no Kinds
// holds any longer are let go; without a cache each Kinds encodes its own.
func TestImageCache(t *testing.T) {
	kinds := func(c *ImageCache, seed int) *Kinds {
		t.Helper()
		cfg := kindsConfig(t, "http://127.0.0.1:1", "openai-chat", fmt.Sprintf("    images: {count: 2, width: 16, height: 16, seed: %d}\n", seed))
		k, err := c.NewKinds(&cfg.Workloads[0].Kinds)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	same := func(a, b *Kinds) bool {
		return unsafe.SliceData(a.attach.Images[1].DataURL()) == unsafe.SliceData(b.attach.Images[1].DataURL())
	}
	var c ImageCache
	a, b, other := kinds(&c, 1), kinds(&c, 1), kinds(&c, 2)
	if !same(a, b) {
		t.Error("two Kinds of the same images through one cache encoded them twice")
	}
	if same(a, other) || bytes.Equal(a.attach.Images[1].DataURL(), other.attach.Images[1].DataURL()) {
		t.Error("images of another seed were shared")
	}
	if x, y := kinds(nil, 1), kinds(nil, 1); same(x, y) || !bytes.Equal(x.attach.Images[1].DataURL(), a.attach.Images[1].DataURL()) {
		t.Error("without a cache, the images are not encoded anew, or not the same bytes")
	}
	a, b = nil, nil
	runtime.GC()
	kinds(&c, 3)
	c.mu.Lock()
	_, kept := c.m[config.Images{Count: 2, Width: 16, Height: 16, Format: config.ImagePNG, Seed: 1}]
	n := len(c.m)
	c.mu.Unlock()
	if kept || n != 2 {
		t.Errorf("after the Kinds of seed 1 were dropped, the cache holds %d images (seed 1 among them: %v), want those of seeds 2 and 3", n, kept)
	}
	runtime.KeepAlive(other)
}
