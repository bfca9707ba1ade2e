package plan

import (
	"sync"
	"weak"

	"github.com/infer-exporter/infer_exporter/internal/config"
	"github.com/infer-exporter/infer_exporter/probe/client"
	"github.com/infer-exporter/infer_exporter/probe/prompt"
)

// ImageCache keeps the images of the Kinds built through it, encoded once
// for every Kinds that asks for the same images (the same count, size,
// format and seed: the same bytes), for as long as one of them is held.
// A reload builds the changed workloads' Kinds while the old ones drain
// their requests in flight: without the cache, both held their images
// (4 workloads at config.MaxImagePixelBytes, some 74 MB each time) and
// the new ones were encoded again (some 0.5 s of CPU for each). The cache
// holds its images weakly: images no Kinds holds any longer are collected.
// Its zero value is ready; it is safe for concurrent use.
type ImageCache struct {
	mu sync.Mutex
	m  map[config.Images]weak.Pointer[imageSet]
}

// imageSet is one configuration's images, encoded once.
type imageSet struct {
	once   sync.Once
	images []client.Image
	err    error
}

// images returns the images of im, from the cache when a Kinds holds
// them still, encoded otherwise (c nil: always).
func (c *ImageCache) images(im config.Images) (*imageSet, error) {
	var set *imageSet
	if c == nil {
		set = &imageSet{}
	} else {
		c.mu.Lock()
		if c.m == nil {
			c.m = map[config.Images]weak.Pointer[imageSet]{}
		}
		set = c.m[im].Value()
		if set == nil {
			set = &imageSet{}
			c.m[im] = weak.Make(set)
		}
		// Forget the images collected since: the map holds at most
		// the images alive, and one entry being made.
		for k, p := range c.m {
			if p.Value() == nil {
				delete(c.m, k)
			}
		}
		c.mu.Unlock()
	}
	// Encoded outside the lock: another configuration's images are not
	// held up; the same one's wait for this encoding.
	set.once.Do(func() { set.images, set.err = encodeImages(im) })
	return set, set.err
}

// encodeImages encodes im's images once, as every request that carries
// them sends them: their bodies share these bytes (client.Image).
func encodeImages(im config.Images) ([]client.Image, error) {
	raw, mime, err := prompt.Images(im)
	if err != nil {
		return nil, err
	}
	out := make([]client.Image, len(raw))
	for i, b := range raw {
		out[i] = client.NewImage(mime, b)
		raw[i] = nil // the PNG or JPEG is garbage once encoded
	}
	return out, nil
}
