// Package ctxio bounds a read by a context: the one reader that both the
// engine scrape's parser and the bench's file readers go through.
package ctxio

import (
	"context"
	"io"
)

// Reader reads R, ending with Ctx's error once Ctx is done. When Chunk is
// above 0, one read asks for at most Chunk bytes, so that a read from a
// slow source ends at the next chunk after Ctx is done.
type Reader struct {
	Ctx   context.Context
	R     io.Reader
	Chunk int
}

func (c Reader) Read(p []byte) (int, error) {
	if err := c.Ctx.Err(); err != nil {
		return 0, err
	}
	if c.Chunk > 0 && len(p) > c.Chunk {
		p = p[:c.Chunk]
	}
	return c.R.Read(p)
}
