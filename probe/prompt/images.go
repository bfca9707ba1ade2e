package prompt

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// MaxImageBytes bounds the encoded bytes of one request's images together.
// The configuration bounds their pixels (config.MaxImagePixelBytes); a PNG
// of them can exceed its raw bytes by its framing, so the encoder's output
// is checked again.
const MaxImageBytes = config.MaxImagePixelBytes + 1<<20

// Images encodes c.Count synthetic images of c.Width × c.Height in
// c.Format, a pure function of c (its seed): the same configuration, the
// same bytes, so a workload makes them once and a rerun sends what the last
// run sent. Each is a smooth gradient under seeded noise, so that neither
// PNG nor JPEG shrinks it to nothing (a server's image encoder sees a
// photograph's entropy, not a flat fill). It returns each image's bytes and
// their media type.
func Images(c config.Images) ([][]byte, string, error) {
	mime := "image/png"
	if c.Format == config.ImageJPEG {
		mime = "image/jpeg"
	}
	out := make([][]byte, 0, c.Count)
	total := 0
	for i := range c.Count {
		rng := rand.New(rand.NewPCG(uint64(c.Seed), uint64(i)))
		img := image.NewNRGBA(image.Rect(0, 0, c.Width, c.Height))
		for y := range c.Height {
			for x := range c.Width {
				n := uint8(rng.IntN(64))
				img.SetNRGBA(x, y, color.NRGBA{
					R: uint8(x*255/max(c.Width, 1)) ^ n,
					G: uint8(y*255/max(c.Height, 1)) ^ n,
					B: uint8(i*37) ^ n,
					A: 255,
				})
			}
		}
		var buf bytes.Buffer
		var err error
		if c.Format == config.ImageJPEG {
			err = jpeg.Encode(&buf, img, &jpeg.Options{Quality: 85})
		} else {
			err = png.Encode(&buf, img)
		}
		if err != nil {
			return nil, "", fmt.Errorf("encoding image %d: %w", i, err)
		}
		total += buf.Len()
		if total > MaxImageBytes {
			return nil, "", fmt.Errorf("images of %d bytes and more: over MaxImageBytes (%d)", total, MaxImageBytes)
		}
		out = append(out, buf.Bytes())
	}
	return out, mime, nil
}
