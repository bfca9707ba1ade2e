package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// CapturedRequest is one line of our own recorded-request format
// (FormatJSONL), as the shadow proxy writes it:
//
//	{"time":"2025-06-01T12:00:00.123456789Z","method":"POST","path":"/v1/chat/completions",
//	 "status":200,"body":{"model":"m","messages":[...],"stream":true},"output_tokens":57}
//
// A line holds exactly one of "time" (RFC 3339, nanoseconds allowed) and
// "offset" (seconds from the trace's start, a number), and every line of a
// trace uses the same one. Offsets of the records are measured from the
// earliest one. "body" is required and must be a JSON object: the request
// body as it was sent (the shadow proxy drops whitespace around it, and
// compacts a body that spans lines, since a JSON line cannot hold a line
// break). "output_tokens" is the output length the server
// reported (its usage), when known. "method", "path", "status" and
// "redacted" describe the capture; a "path" tells which API the body is for.
// Unknown fields are refused.
type CapturedRequest struct {
	Time         *time.Time      `json:"time,omitempty"`
	Offset       *float64        `json:"offset,omitempty"`
	Method       string          `json:"method,omitempty"`
	Path         string          `json:"path,omitempty"`
	Status       int             `json:"status,omitempty"`
	Body         json.RawMessage `json:"body"`
	OutputTokens *int            `json:"output_tokens,omitempty"`
	// Redacted says the message text was replaced by filler of the same
	// token length (see the shadow proxy).
	Redacted bool `json:"redacted,omitempty"`
}

// noAbs marks a record that carried an offset rather than an absolute time.
const noAbs = math.MinInt64

// jsonlParser reads FormatJSONL lines.
type jsonlParser struct {
	lastAbs int64 // the last parsed record's Unix ns, or noAbs
	mode    *jsonlMode
}

type jsonlMode int

const (
	modeUnknown jsonlMode = iota
	modeTime
	modeOffset
)

func (p *jsonlParser) parse(line []byte, _ int, rec *Record) (bool, string) {
	var c CapturedRequest
	if err := decodeStrict(line, &c); err != nil {
		return false, jsonErrorReason(err)
	}
	var mode jsonlMode
	switch {
	case c.Time != nil && c.Offset != nil:
		return false, `holds both "time" and "offset"; use one`
	case c.Time != nil:
		mode = modeTime
		if !inTimeRange(*c.Time) {
			return false, fmt.Sprintf(`"time" %s is not between %d and %d`, c.Time.Format(time.RFC3339Nano), minTime.Year(), maxTime.Year())
		}
		p.lastAbs = c.Time.UnixNano()
	case c.Offset != nil:
		mode = modeOffset
		off, ok := offsetOf(*c.Offset, time.Second)
		if !ok {
			return false, fmt.Sprintf(`"offset" %v must be a number of seconds in [0, %.0f]`, *c.Offset, maxOffset.Seconds())
		}
		p.lastAbs = noAbs
		rec.Offset = off
	default:
		return false, `needs "time" or "offset"`
	}
	if *p.mode == modeUnknown {
		*p.mode = mode
	} else if *p.mode != mode {
		return false, `mixes "time" and "offset" with the lines before it; a trace uses one`
	}
	body := bytes.TrimSpace(c.Body)
	if len(body) == 0 || body[0] != '{' {
		return false, `"body" must be a JSON object (the request body as sent)`
	}
	if c.Method != "" && c.Method != "POST" {
		return false, fmt.Sprintf(`"method" %s: only POST requests are replayed`, quote(c.Method))
	}
	if c.OutputTokens != nil {
		if n := *c.OutputTokens; n < 0 || n > maxTokens {
			return false, fmt.Sprintf(`"output_tokens" %d must be in [0, %d]`, n, maxTokens)
		}
		rec.OutputTokens = *c.OutputTokens
	}
	// The line buffer is reused; the body must own its bytes.
	rec.Body = append(json.RawMessage(nil), body...)
	rec.Path = c.Path
	return true, ""
}
