// Package sse reads a text/event-stream body as the WHATWG HTML standard
// defines it ("Server-sent events", section 9.2.6, interpreting an event
// stream), with one addition the standard leaves to the user agent: a bound on
// line and event length, so that a misbehaving server cannot make the reader
// allocate without limit.
//
// The reader is the hot path of every streamed token the exporter measures, so
// it does not allocate per event: Event.Data aliases a buffer that the next
// call to Next overwrites. It never reads ahead of the event it returns, so the
// instant Next returns is the instant the event's last byte was available.
package sse

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"time"
)

// ErrLineTooLong is returned when a line exceeds the reader's maxLineBytes.
var ErrLineTooLong = errors.New("sse: line too long")

// ErrEventTooLong is returned when the data of one event (the data lines
// joined with "\n") exceeds the reader's maxLineBytes. Without it, an event
// made of many short data lines could grow without bound.
var ErrEventTooLong = errors.New("sse: event data too long")

// Event is one dispatched event.
type Event struct {
	// Name is the event type: the last "event:" field, or "message" when the
	// event had none.
	Name string
	// ID is the last event ID buffer at dispatch. As the standard says, it
	// persists across events until an "id:" field changes it.
	ID string
	// Data is the event's data lines joined with "\n". It is valid only until
	// the next call to Next.
	Data []byte
}

// defaultEventName is what the standard dispatches when no "event:" field was
// given.
const defaultEventName = "message"

// initialBufBytes is the first size of the read buffer. A vLLM chat chunk is
// about 250 bytes, so one buffer holds several of them; a longer line grows
// it (doubling, up to the line limit). One buffer lives per stream in
// flight.
const initialBufBytes = 1024

// maxEmptyReads is how many consecutive (0, nil) reads are tolerated before
// giving up with io.ErrNoProgress, as bufio does.
const maxEmptyReads = 100

var bom = []byte("\xEF\xBB\xBF")

// Reader reads events from an event stream. It is not safe for concurrent use.
type Reader struct {
	src     io.Reader
	maxLine int

	buf        []byte // read buffer; buf[start:end] is unconsumed input
	start, end int
	readErr    error // error from src, returned once buf is drained

	skipLF    bool // the last line ended with CR; a following LF belongs to it
	bomDone   bool // the leading BOM, if any, has been handled
	pending   bool // a non-comment line was seen since the last blank line
	sticky    error
	data      []byte // data buffer
	hasData   bool   // at least one data field since the last dispatch
	eventName []byte // event type buffer
	hasName   bool
	lastID    string // last event ID buffer, as a string to hand out without allocating
	idBytes   []byte // scratch for comparing an incoming id with lastID
	name      string // Name of the previous dispatch, reused when unchanged
	retry     time.Duration
	hasRetry  bool
}

// NewReader returns a Reader of r that refuses lines, and events' data, longer
// than maxLineBytes (not counting line terminators). maxLineBytes below 1 is
// treated as 1.
func NewReader(r io.Reader, maxLineBytes int) *Reader {
	if maxLineBytes < 1 {
		maxLineBytes = 1
	}
	return &Reader{
		src:     r,
		maxLine: maxLineBytes,
		buf:     make([]byte, min(initialBufBytes, maxLineBytes+1)),
		name:    defaultEventName,
	}
}

// Retry returns the reconnection time the stream last set with a "retry:"
// field, and whether it set one.
func (r *Reader) Retry() (time.Duration, bool) { return r.retry, r.hasRetry }

// Next returns the next event.
//
// At the end of the input it returns io.EOF if the stream ended cleanly (at an
// event boundary, or after comments only). If the stream ended inside an
// event, it returns io.ErrUnexpectedEOF together with the undispatched event
// built from the complete lines seen (a final line with no terminator is
// dropped); the standard says to discard that event, which a caller does by
// ignoring it. A read error from the underlying reader is returned as is,
// after every event already complete in the buffer. ErrLineTooLong and
// ErrEventTooLong are final: every later call returns them again.
func (r *Reader) Next() (Event, error) {
	if r.sticky != nil {
		return Event{}, r.sticky
	}
	for {
		line, ok, err := r.readLine()
		if err != nil {
			if errors.Is(err, ErrLineTooLong) {
				r.sticky = err
				return Event{}, err
			}
			if err == io.EOF && r.pending {
				r.pending = false
				return r.event(), io.ErrUnexpectedEOF
			}
			return Event{}, err
		}
		if !ok {
			continue
		}
		if len(line) == 0 {
			r.pending = false
			if ev, ok := r.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		if line[0] == ':' {
			continue // comment, including keep-alives
		}
		r.pending = true
		if err := r.field(line); err != nil {
			r.sticky = err
			return Event{}, err
		}
	}
}

// readLine returns the next complete line without its terminator. ok is false
// when the call consumed input (the LF of a CRLF split across reads, or a BOM)
// without completing a line. The returned slice aliases r.buf and is valid
// until the next call.
func (r *Reader) readLine() (line []byte, ok bool, err error) {
	for {
		if r.end > r.start {
			if r.skipLF {
				r.skipLF = false
				if r.buf[r.start] == '\n' {
					r.start++
					continue
				}
			}
			if !r.bomDone {
				if r.end-r.start < len(bom) && bytes.HasPrefix(bom, r.buf[r.start:r.end]) && r.readErr == nil {
					// Could be a split BOM: wait for more input.
					if err := r.fill(); err != nil {
						return nil, false, err
					}
					continue
				}
				r.bomDone = true
				if bytes.HasPrefix(r.buf[r.start:r.end], bom) {
					r.start += len(bom)
					continue
				}
			}
			rest := r.buf[r.start:r.end]
			// LF is by far the usual terminator, and IndexByte is vectorised,
			// so look for LF first and then for a CR before it.
			if i := bytes.IndexByte(rest, '\n'); i >= 0 {
				if j := bytes.IndexByte(rest[:i], '\r'); j >= 0 {
					return r.takeCR(j)
				}
				if i > r.maxLine {
					return nil, false, ErrLineTooLong
				}
				r.start += i + 1
				return rest[:i], true, nil
			}
			if j := bytes.IndexByte(rest, '\r'); j >= 0 {
				return r.takeCR(j)
			}
			if len(rest) > r.maxLine {
				return nil, false, ErrLineTooLong
			}
		}
		if err := r.fill(); err != nil {
			return nil, false, err
		}
	}
}

// takeCR returns the line that ends with the CR at offset j of the unconsumed
// input, consuming an LF that follows it now or, if the input ends at the CR,
// on the next read.
func (r *Reader) takeCR(j int) ([]byte, bool, error) {
	if j > r.maxLine {
		return nil, false, ErrLineTooLong
	}
	line := r.buf[r.start : r.start+j]
	r.start += j + 1
	if r.start < r.end {
		if r.buf[r.start] == '\n' {
			r.start++
		}
	} else {
		r.skipLF = true
	}
	return line, true, nil
}

// fill reads more input into the buffer, compacting it first and growing it
// up to maxLine+1 bytes, which is enough to tell that a line is too long.
// It returns io.EOF at the end of the input when nothing is left buffered as
// a partial line, and the pending read error otherwise.
func (r *Reader) fill() error {
	if r.readErr != nil {
		return r.drainErr()
	}
	if r.start > 0 {
		n := copy(r.buf, r.buf[r.start:r.end])
		r.start, r.end = 0, n
	}
	if r.end == len(r.buf) {
		if len(r.buf) > r.maxLine {
			// Unreachable through readLine, which reports a long line
			// before the buffer fills; kept as a guard on memory.
			return ErrLineTooLong
		}
		nb := make([]byte, min(2*len(r.buf), r.maxLine+1))
		copy(nb, r.buf[:r.end])
		r.buf = nb
	}
	for range maxEmptyReads {
		n, err := r.src.Read(r.buf[r.end:])
		if n < 0 || n > len(r.buf)-r.end {
			r.readErr = errors.New("sse: reader returned an invalid count")
			return r.drainErr()
		}
		r.end += n
		if err != nil {
			r.readErr = err
			if n > 0 {
				return nil
			}
			return r.drainErr()
		}
		if n > 0 {
			return nil
		}
	}
	r.readErr = io.ErrNoProgress
	return r.drainErr()
}

// drainErr reports the stored read error once no complete line can be made of
// what is buffered. A final line without a terminator is dropped, as the
// standard says, but at EOF it means the stream ended inside an event.
func (r *Reader) drainErr() error {
	if r.end > r.start {
		// A partial line (no terminator) is left: it can never complete.
		// Unless it is a comment, the stream stopped inside an event.
		if r.readErr == io.EOF && r.buf[r.start] != ':' {
			r.pending = true
		}
		r.start = r.end
	}
	return r.readErr
}

// field processes one non-empty, non-comment line.
func (r *Reader) field(line []byte) error {
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) { // no allocation: the compiler compares in place
	case "data":
		extra := len(value)
		if r.hasData {
			extra++ // the "\n" that joins it to the previous line
		}
		if len(r.data)+extra > r.maxLine {
			return ErrEventTooLong
		}
		if r.hasData {
			r.data = append(r.data, '\n')
		}
		r.data = append(r.data, value...)
		r.hasData = true
	case "event":
		r.eventName = append(r.eventName[:0], value...)
		r.hasName = true
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			if string(value) != r.lastID { // compared without allocating
				r.lastID = string(value)
			}
		}
	case "retry":
		if ms, ok := parseDigits(value); ok {
			r.retry = time.Duration(ms) * time.Millisecond
			r.hasRetry = true
		}
	}
	return nil
}

// parseDigits parses a non-empty string of ASCII digits, as the standard
// requires of "retry:"; anything else is ignored.
func parseDigits(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	ms, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || ms > int64(time.Duration(1<<63-1)/time.Millisecond) {
		return 0, false
	}
	return ms, true
}

// dispatch ends the current event at a blank line. Per the standard, an event
// with an empty data buffer is not dispatched, and the buffers are reset.
func (r *Reader) dispatch() (Event, bool) {
	if !r.hasData {
		r.resetEvent()
		return Event{}, false
	}
	ev := r.event()
	r.resetEvent()
	return ev, true
}

// event builds the Event from the current buffers without resetting them.
func (r *Reader) event() Event {
	name := defaultEventName
	if r.hasName && len(r.eventName) > 0 {
		if string(r.eventName) != r.name {
			r.name = string(r.eventName)
		}
		name = r.name
	}
	return Event{Name: name, ID: r.lastID, Data: r.data}
}

func (r *Reader) resetEvent() {
	// Keep the data buffer's memory for the next event. The Event just
	// returned aliases it; it is overwritten only on the next Next.
	r.data = r.data[:0]
	r.hasData = false
	r.eventName = r.eventName[:0]
	r.hasName = false
}
