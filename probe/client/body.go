package client

import (
	"fmt"
	"io"
	"mime"
	"strings"
)

// isJSON says whether a 2xx response is one JSON document rather than a
// stream: application/json or any +json type. NDJSON
// (application/x-ndjson) is a stream.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// bodyDecoder reads a non-streamed JSON response, from a server that
// ignored "stream": true, as one frame: the flavor's parser reads it as it
// reads a stream's frame, and the body is its own end marker. Its whole
// answer is then one content event, read when the body's last byte was, so
// the request has a TTFT and an end but no TPOT or ITL (see
// observation.Request.TPOT).
type bodyDecoder struct {
	body   io.Reader
	max    int
	data   []byte
	read   bool
	parser frameParser
}

func newBodyDecoder(body io.Reader, maxBytes int, p frameParser) *bodyDecoder {
	return &bodyDecoder{body: body, max: maxBytes, parser: p}
}

func (d *bodyDecoder) Next() error {
	if d.read {
		return io.EOF
	}
	d.read = true
	data, err := io.ReadAll(io.LimitReader(d.body, int64(d.max)+1))
	if err != nil {
		return err
	}
	if len(data) > d.max {
		return &ProtocolError{Msg: fmt.Sprintf("JSON body longer than %d bytes", d.max)}
	}
	d.data = data
	return nil
}

func (d *bodyDecoder) Decode(c *Chunk) error {
	if err := d.parser.parse(d.data, c); err != nil {
		return err
	}
	c.Done = true
	return nil
}
