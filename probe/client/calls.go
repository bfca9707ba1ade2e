package client

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// callParts are the tool-call parts a decoder read from one frame, their
// texts in one buffer that only grows, so that reading them allocates
// nothing once warm.
type callParts struct {
	spans []callSpan
	text  []byte
}

// callSpan is one part, its texts as offsets into callParts.text.
type callSpan struct {
	index          int
	id, name, args [2]int
	whole          bool
}

func (p *callParts) reset() { p.spans, p.text = p.spans[:0], p.text[:0] }

// add appends a part (index -1: none).
func (p *callParts) add(index int, id, name, args []byte, whole bool) {
	p.spans = append(p.spans, callSpan{index: index, id: p.put(id), name: p.put(name), args: p.put(args), whole: whole})
}

func (p *callParts) put(b []byte) [2]int {
	n := len(p.text)
	p.text = append(p.text, b...)
	return [2]int{n, len(p.text)}
}

func (p *callParts) at(r [2]int) []byte { return p.text[r[0]:r[1]] }

// addAll appends q's parts.
func (p *callParts) addAll(q *callParts) {
	for _, s := range q.spans {
		p.add(s.index, q.at(s.id), q.at(s.name), q.at(s.args), s.whole)
	}
}

// appendTo appends the parts to dst as CallParts that alias p.
func (p *callParts) appendTo(dst []CallPart) []CallPart {
	for _, s := range p.spans {
		dst = append(dst, CallPart{Index: s.index, ID: p.at(s.id), Name: p.at(s.name), Arguments: p.at(s.args), Whole: s.whole})
	}
	return dst
}

// MaxToolCalls bounds the tool calls kept of one answer. A model calls a
// few functions at once; 64 is far beyond what a prompt asks for, and
// keeps a kept answer's bookkeeping (its calls, each with its id) within a
// few KiB beside its text, which DefaultMaxTextBytes bounds.
const MaxToolCalls = 64

// maxCallIDBytes bounds the id kept of a call, only to tell its
// fragments from another call's: ids are a few dozen bytes (call_..., a
// Responses item's fc_...), and one longer is told apart by its first
// maxCallIDBytes.
const maxCallIDBytes = 128

// callSet puts the kept tool calls of an answer together from their
// parts, each call from its own, in the order the calls began: the
// fragments of parallel calls may alternate in a stream (the chat API
// tells them apart by index, the Responses API by item id and
// output_index), and concatenated in arrival order they would read as
// one call of a function named twice. A part joins
//
//   - a call of its own when it is Whole;
//   - with an id, the call of that id; else, with an index, the latest
//     call of that index that has no id yet (it takes the part's id); else
//     a new call. So a server that numbers every call 0 but gives each
//     its own id has its calls apart, as the chat API's fragments after a
//     call's first carry its index alone;
//   - with an index and no id, the latest call of that index, else a new
//     call (one whose first fragment never came: its name is empty, which
//     the judge refuses);
//   - with neither (a deprecated function_call, a server that sends
//     neither), the latest call, unless the part names a function and that
//     call has arguments already: then a new call, as the calls of such a
//     stream follow each other.
//
// A part with no text is no part of a call.
type callSet struct {
	calls []keptCall
	// bytes is the names' and arguments' bytes kept, counted against the
	// bound on kept text.
	bytes int
}

// keptCall is one call being put together.
type keptCall struct {
	index      int // -1: none
	id         []byte
	name, args []byte
}

// add adds a frame's parts; an error when they would begin more than
// MaxToolCalls calls.
func (s *callSet) add(parts []CallPart) error {
	for i := range parts {
		p := &parts[i]
		if len(p.Name) == 0 && len(p.Arguments) == 0 {
			continue
		}
		c := s.find(p)
		if c == nil {
			if len(s.calls) == MaxToolCalls {
				return &ProtocolError{Msg: fmt.Sprintf("more than %d tool calls in one answer (client.MaxToolCalls)", MaxToolCalls)}
			}
			s.calls = append(s.calls, keptCall{index: p.Index, id: append([]byte(nil), cutID(p.ID)...)})
			c = &s.calls[len(s.calls)-1]
		}
		c.name = append(c.name, p.Name...)
		c.args = append(c.args, p.Arguments...)
		s.bytes += len(p.Name) + len(p.Arguments)
	}
	return nil
}

// find is the call p continues; nil when p begins one (callSet's rules).
func (s *callSet) find(p *CallPart) *keptCall {
	if p.Whole {
		return nil
	}
	if id := cutID(p.ID); len(id) > 0 {
		for i := len(s.calls) - 1; i >= 0; i-- {
			if bytes.Equal(s.calls[i].id, id) {
				return &s.calls[i]
			}
		}
		if p.Index < 0 {
			return nil
		}
		for i := len(s.calls) - 1; i >= 0; i-- {
			if c := &s.calls[i]; c.index == p.Index && len(c.id) == 0 {
				c.id = append(c.id, id...)
				return c
			}
		}
		return nil
	}
	if p.Index >= 0 {
		for i := len(s.calls) - 1; i >= 0; i-- {
			if s.calls[i].index == p.Index {
				return &s.calls[i]
			}
		}
		return nil
	}
	if n := len(s.calls); n > 0 {
		if last := &s.calls[n-1]; len(p.Name) == 0 || len(last.args) == 0 {
			return last
		}
	}
	return nil
}

func cutID(id []byte) []byte { return id[:min(len(id), maxCallIDBytes)] }

// result is the kept calls: their text, each call's name then its
// arguments, and the calls one by one, whose texts are substrings of it
// (one copy of the bytes, not two).
func (s *callSet) result() (string, []observation.ToolCall) {
	if len(s.calls) == 0 {
		return "", nil
	}
	var b strings.Builder
	b.Grow(s.bytes)
	for _, c := range s.calls {
		b.Write(c.name)
		b.Write(c.args)
	}
	// A Builder's String is its buffer, not a copy of it.
	text := b.String()
	calls := make([]observation.ToolCall, len(s.calls))
	off := 0
	for i, c := range s.calls {
		calls[i].Name = text[off : off+len(c.name)]
		off += len(c.name)
		calls[i].Arguments = text[off : off+len(c.args)]
		off += len(c.args)
	}
	return text, calls
}
