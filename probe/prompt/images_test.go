package prompt

import (
	"bytes"
	"image"
	"testing"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

func TestImagesDeterministic(t *testing.T) {
	for _, tc := range []struct {
		c    config.Images
		mime string
	}{
		{config.Images{Count: 2, Width: 32, Height: 16, Format: config.ImagePNG, Seed: 1}, "image/png"},
		{config.Images{Count: 3, Width: 40, Height: 40, Format: config.ImageJPEG, Seed: 2}, "image/jpeg"},
	} {
		a, mime, err := Images(tc.c)
		if err != nil {
			t.Fatal(err)
		}
		b, _, _ := Images(tc.c)
		if mime != tc.mime || len(a) != tc.c.Count {
			t.Fatalf("%+v: %d images of %s", tc.c, len(a), mime)
		}
		for i := range a {
			if !bytes.Equal(a[i], b[i]) {
				t.Errorf("%+v: image %d differs between two calls", tc.c, i)
			}
			img, format, err := image.Decode(bytes.NewReader(a[i]))
			if err != nil || "image/"+format != tc.mime || img.Bounds().Dx() != tc.c.Width || img.Bounds().Dy() != tc.c.Height {
				t.Errorf("%+v: image %d decodes as %s %v: %v", tc.c, i, format, img.Bounds(), err)
			}
		}
		if tc.c.Count > 1 && bytes.Equal(a[0], a[1]) {
			t.Errorf("%+v: images 0 and 1 are the same", tc.c)
		}
		other := tc.c
		other.Seed++
		c, _, _ := Images(other)
		if bytes.Equal(a[0], c[0]) {
			t.Errorf("%+v: another seed, the same image", tc.c)
		}
	}
}
