package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// ev is an Event with its data copied, so that results can be compared after
// the reader has moved on.
type ev struct {
	Name, ID, Data string
}

// result is everything a reader produced from one input.
type result struct {
	Events []ev
	// Err is the error that ended reading: io.EOF for a clean end.
	Err error
	// Partial is the event handed back with io.ErrUnexpectedEOF.
	Partial *ev
	Retry   time.Duration
	// HasRetry is whether a valid retry field was seen.
	HasRetry bool
}

func (r result) String() string {
	var b strings.Builder
	for _, e := range r.Events {
		fmt.Fprintf(&b, "%q/%q/%q ", e.Name, e.ID, e.Data)
	}
	fmt.Fprintf(&b, "err=%v", r.Err)
	if r.Partial != nil {
		fmt.Fprintf(&b, " partial=%q/%q/%q", r.Partial.Name, r.Partial.ID, r.Partial.Data)
	}
	if r.HasRetry {
		fmt.Fprintf(&b, " retry=%v", r.Retry)
	}
	return b.String()
}

// collect reads src until an error, checking on the way that the reader's
// memory stays within the bounds its line limit promises.
func collect(t testing.TB, src io.Reader, maxLine int) result {
	t.Helper()
	r := NewReader(src, maxLine)
	var res result
	for i := 0; ; i++ {
		e, err := r.Next()
		checkBounds(t, r, maxLine)
		if err != nil {
			res.Err = err
			if errors.Is(err, io.ErrUnexpectedEOF) {
				res.Partial = &ev{e.Name, e.ID, string(e.Data)}
			}
			// Errors are final.
			if _, again := r.Next(); !sameErr(err, again) && !(err == io.ErrUnexpectedEOF && again == io.EOF) {
				t.Fatalf("Next after %v returned %v", err, again)
			}
			break
		}
		if i > 1<<20 {
			t.Fatal("reader does not terminate")
		}
		res.Events = append(res.Events, ev{e.Name, e.ID, string(e.Data)})
	}
	res.Retry, res.HasRetry = r.Retry()
	return res
}

func sameErr(a, b error) bool { return a == b || errors.Is(b, a) }

// checkBounds asserts the memory bound: the read buffer never exceeds the
// line limit plus one byte, and the data, name and ID buffers stay within a
// small factor of it (append may round capacity up).
func checkBounds(t testing.TB, r *Reader, maxLine int) {
	t.Helper()
	if maxLine < 1 {
		maxLine = 1
	}
	if c := cap(r.buf); c > maxLine+1 {
		t.Fatalf("read buffer cap %d exceeds maxLine+1 = %d", c, maxLine+1)
	}
	limit := 2*maxLine + 64
	if c := cap(r.data); c > limit {
		t.Fatalf("data buffer cap %d exceeds %d", c, limit)
	}
	if c := cap(r.eventName); c > limit {
		t.Fatalf("event name cap %d exceeds %d", c, limit)
	}
	if len(r.lastID) > maxLine {
		t.Fatalf("id length %d exceeds line limit %d", len(r.lastID), maxLine)
	}
}

func TestReader(t *testing.T) {
	eof := io.EOF
	cases := []struct {
		name    string
		in      string
		maxLine int // 0 means 1 MiB
		want    result
	}{
		{
			name: "one event LF",
			in:   "data: hello\n\n",
			want: result{Events: []ev{{"message", "", "hello"}}, Err: eof},
		},
		{
			name: "CRLF",
			in:   "data: a\r\n\r\ndata: b\r\n\r\n",
			want: result{Events: []ev{{"message", "", "a"}, {"message", "", "b"}}, Err: eof},
		},
		{
			name: "lone CR",
			in:   "data: a\r\rdata: b\r\r",
			want: result{Events: []ev{{"message", "", "a"}, {"message", "", "b"}}, Err: eof},
		},
		{
			name: "mixed endings",
			in:   "data: a\r\ndata: b\rdata: c\n\r\n",
			want: result{Events: []ev{{"message", "", "a\nb\nc"}}, Err: eof},
		},
		{
			name: "CR CR LF is two lines",
			in:   "data: a\r\r\ndata: b\n\n",
			want: result{Events: []ev{{"message", "", "a"}, {"message", "", "b"}}, Err: eof},
		},
		{
			name: "multi-line data joined with LF",
			in:   "data: line1\ndata: line2\ndata:\ndata: line4\n\n",
			want: result{Events: []ev{{"message", "", "line1\nline2\n\nline4"}}, Err: eof},
		},
		{
			name: "comments and keep-alives",
			in:   ": ping\n\n:\n: another\ndata: x\n: inside\n\n\n\n",
			want: result{Events: []ev{{"message", "", "x"}}, Err: eof},
		},
		{
			name: "event id retry",
			in:   "event: add\nid: 7\nretry: 1500\ndata: {}\n\n",
			want: result{Events: []ev{{"add", "7", "{}"}}, Err: eof, Retry: 1500 * time.Millisecond, HasRetry: true},
		},
		{
			name: "event type resets, id persists",
			in:   "event: a\nid: 1\ndata: x\n\ndata: y\n\nid\ndata: z\n\n",
			want: result{Events: []ev{{"a", "1", "x"}, {"message", "1", "y"}, {"message", "", "z"}}, Err: eof},
		},
		{
			name: "id with NUL ignored",
			in:   "id: 1\ndata: x\n\nid: 2\x003\ndata: y\n\n",
			want: result{Events: []ev{{"message", "1", "x"}, {"message", "1", "y"}}, Err: eof},
		},
		{
			name: "empty event field means message",
			in:   "event:\ndata: x\n\n",
			want: result{Events: []ev{{"message", "", "x"}}, Err: eof},
		},
		{
			name: "retry not digits ignored",
			in:   "retry: 1s\nretry: -5\nretry:\ndata: x\n\n",
			want: result{Events: []ev{{"message", "", "x"}}, Err: eof},
		},
		{
			name: "field without colon",
			in:   "data\n\ndata\ndata\n\n",
			want: result{Events: []ev{{"message", "", ""}, {"message", "", "\n"}}, Err: eof},
		},
		{
			name: "no space after colon, and only one space stripped",
			in:   "data:x\n\ndata:  y\n\ndata:\tz\n\n",
			want: result{Events: []ev{{"message", "", "x"}, {"message", "", " y"}, {"message", "", "\tz"}}, Err: eof},
		},
		{
			name: "colon inside value",
			in:   "data: {\"a\":1}\n\n",
			want: result{Events: []ev{{"message", "", `{"a":1}`}}, Err: eof},
		},
		{
			name: "unknown fields ignored",
			in:   "foo: bar\nData: no\n...\ndata: x\n\n",
			want: result{Events: []ev{{"message", "", "x"}}, Err: eof},
		},
		{
			name: "event without data is not dispatched",
			in:   "event: a\nid: 9\n\ndata: x\n\n",
			want: result{Events: []ev{{"message", "9", "x"}}, Err: eof},
		},
		{
			name: "leading BOM stripped",
			in:   "\xEF\xBB\xBFdata: x\n\n",
			want: result{Events: []ev{{"message", "", "x"}}, Err: eof},
		},
		{
			name: "BOM only at the start",
			in:   "data: x\n\n\xEF\xBB\xBFdata: y\n\n",
			want: result{Events: []ev{{"message", "", "x"}}, Err: eof},
		},
		{
			name: "empty input",
			in:   "",
			want: result{Err: eof},
		},
		{
			name: "clean end after a comment without terminator",
			in:   "data: x\n\n: bye",
			want: result{Events: []ev{{"message", "", "x"}}, Err: eof},
		},
		{
			name: "end inside an event",
			in:   "data: x\n\ndata: [DONE]\n",
			want: result{Events: []ev{{"message", "", "x"}}, Err: io.ErrUnexpectedEOF, Partial: &ev{"message", "", "[DONE]"}},
		},
		{
			name: "end inside a line drops the line",
			in:   "data: a\ndata: b",
			want: result{Err: io.ErrUnexpectedEOF, Partial: &ev{"message", "", "a"}},
		},
		{
			name:    "line at the limit",
			in:      "data: 1234\n\n",
			maxLine: 10,
			want:    result{Events: []ev{{"message", "", "1234"}}, Err: eof},
		},
		{
			name:    "line at the limit with CRLF",
			in:      "data: 1234\r\n\r\n",
			maxLine: 10,
			want:    result{Events: []ev{{"message", "", "1234"}}, Err: eof},
		},
		{
			name:    "line over the limit LF",
			in:      "data: a\n\ndata: 12345\n\n",
			maxLine: 10,
			want:    result{Events: []ev{{"message", "", "a"}}, Err: ErrLineTooLong},
		},
		{
			name:    "line over the limit CR",
			in:      "data: 12345\r\r",
			maxLine: 10,
			want:    result{Err: ErrLineTooLong},
		},
		{
			name:    "line over the limit without terminator",
			in:      "data: 123456789012345678901234567890",
			maxLine: 10,
			want:    result{Err: ErrLineTooLong},
		},
		{
			name:    "long comment is still a long line",
			in:      ": 1234567890\ndata: x\n\n",
			maxLine: 10,
			want:    result{Err: ErrLineTooLong},
		},
		{
			name:    "event over the limit",
			in:      "data: 1234\ndata: 1234\ndata: 1\n\n",
			maxLine: 10,
			want:    result{Err: ErrEventTooLong},
		},
		{
			name:    "event exactly at the limit",
			in:      "data:1234\ndata:1234\n\n",
			maxLine: 9,
			want:    result{Events: []ev{{"message", "", "1234\n1234"}}, Err: eof},
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			max := tc.maxLine
			if max == 0 {
				max = 1 << 20
			}
			readers := map[string]func(string) io.Reader{
				"whole":    func(s string) io.Reader { return strings.NewReader(s) },
				"one byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
				"half":     func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
				"data+EOF": func(s string) io.Reader { return iotest.DataErrReader(strings.NewReader(s)) },
			}
			for rname, mk := range readers {
				got := collect(t, mk(tc.in), max)
				if !equalResult(got, tc.want) {
					t.Errorf("%s:\n got %v\nwant %v", rname, got, tc.want)
				}
			}
			// The reference parser must agree, so that the fuzz test's
			// oracle is itself checked against these hand-written answers.
			if ref := reference([]byte(tc.in), max); !equalResult(ref, tc.want) {
				t.Errorf("reference:\n got %v\nwant %v", ref, tc.want)
			}
		})
	}
}

func equalResult(a, b result) bool {
	if len(a.Events) == 0 && len(b.Events) == 0 {
		a.Events, b.Events = nil, nil
	}
	return reflect.DeepEqual(a.Events, b.Events) && a.Err == b.Err &&
		reflect.DeepEqual(a.Partial, b.Partial) && a.Retry == b.Retry && a.HasRetry == b.HasRetry
}

// vllmStream is a realistic vLLM chat stream: a role chunk, content chunks, a
// finish chunk, a usage chunk and [DONE].
func vllmStream(contentChunks int) []byte {
	var b bytes.Buffer
	const head = `{"id":"chatcmpl-8f0b1c2d3e4f","object":"chat.completion.chunk","created":1732000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,`
	fmt.Fprintf(&b, "data: %s\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n", head)
	for i := range contentChunks {
		fmt.Fprintf(&b, "data: %s\"delta\":{\"content\":\" tok%d\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n", head, i)
	}
	fmt.Fprintf(&b, "data: %s\"delta\":{\"content\":\"\"},\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null}]}\n\n", head)
	fmt.Fprintf(&b, "data: {\"id\":\"chatcmpl-8f0b1c2d3e4f\",\"object\":\"chat.completion.chunk\",\"created\":1732000000,\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"total_tokens\":%d,\"completion_tokens\":%d}}\n\n", 12+contentChunks, contentChunks)
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// splitReader returns its input in the pieces given by cut offsets.
type splitReader struct {
	data []byte
	cuts []int // ascending offsets
	off  int
}

func (s *splitReader) Read(p []byte) (int, error) {
	if s.off >= len(s.data) {
		return 0, io.EOF
	}
	end := len(s.data)
	for len(s.cuts) > 0 && s.cuts[0] <= s.off {
		s.cuts = s.cuts[1:]
	}
	if len(s.cuts) > 0 && s.cuts[0] < end {
		end = s.cuts[0]
	}
	n := copy(p, s.data[s.off:end])
	s.off += n
	return n, nil
}

// TestReaderEverySplit feeds a stream that exercises every line ending,
// comments and multi-line data, split into two reads at every byte offset,
// and expects the same events each time.
func TestReaderEverySplit(t *testing.T) {
	streams := map[string][]byte{
		"vllm": vllmStream(3),
		"mixed": []byte("\xEF\xBB\xBF: hi\r\nevent: e\r\nid: 1\rretry: 10\ndata: a\r\ndata: b\r\rdata\n\n" +
			":\n\ndata: {\"x\":\"y\"}\r\n\r\ndata: tail\r"),
	}
	for name, data := range streams {
		t.Run(name, func(t *testing.T) {
			const max = 1 << 10
			want := collect(t, bytes.NewReader(data), max)
			if len(want.Events) < 2 {
				t.Fatalf("stream too short to be a test: %v", want)
			}
			if ref := reference(data, max); !equalResult(ref, want) {
				t.Fatalf("reference disagrees:\n got %v\nwant %v", want, ref)
			}
			for i := 0; i <= len(data); i++ {
				got := collect(t, &splitReader{data: data, cuts: []int{i}}, max)
				if !equalResult(got, want) {
					t.Fatalf("split at %d:\n got %v\nwant %v", i, got, want)
				}
			}
			// Every pair of cuts near the CR/LF-dense head.
			for i := 0; i < 40; i++ {
				for j := i + 1; j < 40; j++ {
					got := collect(t, &splitReader{data: data, cuts: []int{i, j}}, max)
					if !equalResult(got, want) {
						t.Fatalf("split at %d,%d:\n got %v\nwant %v", i, j, got, want)
					}
				}
			}
			if got := collect(t, iotest.OneByteReader(bytes.NewReader(data)), max); !equalResult(got, want) {
				t.Fatalf("one byte per read:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// TestReaderSmallLimitsSplit checks that the line limit holds whatever the
// read split, when the buffer has to grow and compact.
func TestReaderSmallLimitsSplit(t *testing.T) {
	data := vllmStream(5)
	for _, max := range []int{1, 7, 100, 300, 400, 4095, 4096, 4097} {
		want := reference(data, max)
		for _, mk := range []func() io.Reader{
			func() io.Reader { return bytes.NewReader(data) },
			func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) },
			func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) },
		} {
			if got := collect(t, mk(), max); !equalResult(got, want) {
				t.Fatalf("max %d:\n got %v\nwant %v", max, got, want)
			}
		}
	}
}

func TestReaderReadError(t *testing.T) {
	boom := errors.New("connection reset")
	src := io.MultiReader(strings.NewReader("data: a\n\ndata: b\n\ndata: c"), iotest.ErrReader(boom))
	r := NewReader(src, 1024)
	for _, want := range []string{"a", "b"} {
		e, err := r.Next()
		if err != nil || string(e.Data) != want {
			t.Fatalf("Next = %q, %v; want %q", e.Data, err, want)
		}
	}
	if _, err := r.Next(); err != boom {
		t.Fatalf("Next error = %v, want %v", err, boom)
	}
}

func TestReaderNoProgress(t *testing.T) {
	r := NewReader(zeroReader{}, 1024)
	if _, err := r.Next(); err != io.ErrNoProgress {
		t.Fatalf("Next error = %v, want io.ErrNoProgress", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// TestReaderNoAllocs checks the hot path's promise: once warm, reading an
// event allocates nothing.
func TestReaderNoAllocs(t *testing.T) {
	data := vllmStream(64)
	src := bytes.NewReader(data)
	r := NewReader(src, 1<<20)
	allocs := testing.AllocsPerRun(20, func() {
		src.Reset(data)
		r.src = src
		r.readErr = nil
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("reading a warm stream allocated %v times, want 0", allocs)
	}
}

// reference is a deliberately naive parser written straight from the
// standard's prose: split the whole input into lines, then interpret them. The
// fuzz test compares the streaming reader with it.
func reference(in []byte, maxLine int) result {
	if maxLine < 1 {
		maxLine = 1
	}
	in = bytes.TrimPrefix(in, bom)
	var (
		res                    result
		data, name             []byte
		hasData, pending, hasN bool
		id                     string
	)
	current := func() ev {
		n := "message"
		if hasN && len(name) > 0 {
			n = string(name)
		}
		return ev{n, id, string(data)}
	}
	for len(in) > 0 {
		i := bytes.IndexAny(in, "\r\n")
		if i < 0 {
			// Final line without terminator.
			if len(in) > maxLine {
				res.Err = ErrLineTooLong
				return res
			}
			if in[0] != ':' {
				pending = true
			}
			break
		}
		line := in[:i]
		if len(line) > maxLine {
			res.Err = ErrLineTooLong
			return res
		}
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			in = in[i+2:]
		} else {
			in = in[i+1:]
		}
		switch {
		case len(line) == 0:
			pending = false
			if hasData {
				res.Events = append(res.Events, current())
			}
			data, hasData, name, hasN = nil, false, nil, false
			continue
		case line[0] == ':':
			continue
		}
		pending = true
		f, v := string(line), ""
		if c := strings.IndexByte(f, ':'); c >= 0 {
			f, v = f[:c], strings.TrimPrefix(f[c+1:], " ")
		}
		switch f {
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, v...)
			hasData = true
			if len(data) > maxLine {
				res.Err = ErrEventTooLong
				return res
			}
		case "event":
			name, hasN = []byte(v), true
		case "id":
			if !strings.Contains(v, "\x00") {
				id = v
			}
		case "retry":
			if ms, ok := parseDigits([]byte(v)); ok {
				res.Retry, res.HasRetry = time.Duration(ms)*time.Millisecond, true
			}
		}
	}
	if pending {
		e := current()
		res.Partial = &e
		res.Err = io.ErrUnexpectedEOF
		return res
	}
	res.Err = io.EOF
	return res
}

// FuzzReader checks, for any input and line limit, that the reader does not
// panic, keeps its memory within the limit, gives the same result however the
// input is split across reads, and agrees with the naive reference parser.
func FuzzReader(f *testing.F) {
	f.Add([]byte("data: hello\n\n"), uint16(1024), uint64(1))
	f.Add([]byte("data: a\r\ndata: b\r\r: c\nid: 1\nevent: x\n\n"), uint16(5), uint64(2))
	f.Add(vllmStream(2), uint16(300), uint64(3))
	f.Add([]byte("\xEF\xBB\xBFretry: 12\ndata\n\n\r\n\rdata: [DONE]\n"), uint16(8), uint64(4))
	f.Add([]byte("data: 1234\ndata: 1234\ndata: 1\n\n"), uint16(10), uint64(5))
	f.Fuzz(func(t *testing.T, in []byte, max16 uint16, seed uint64) {
		maxLine := int(max16%4096) + 1
		want := reference(in, maxLine)
		whole := collect(t, bytes.NewReader(in), maxLine)
		if !equalResult(whole, want) {
			t.Fatalf("whole read:\n got %v\nwant %v", whole, want)
		}
		one := collect(t, iotest.OneByteReader(bytes.NewReader(in)), maxLine)
		if !equalResult(one, want) {
			t.Fatalf("one byte reads:\n got %v\nwant %v", one, want)
		}
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		var cuts []int
		for off := 0; off < len(in); {
			off += 1 + rng.IntN(64)
			cuts = append(cuts, off)
		}
		split := collect(t, &splitReader{data: in, cuts: cuts}, maxLine)
		if !equalResult(split, want) {
			t.Fatalf("random split %v:\n got %v\nwant %v", cuts, split, want)
		}
		for _, e := range whole.Events {
			if len(e.Data) > maxLine {
				t.Fatalf("event data of %d bytes exceeds the limit %d", len(e.Data), maxLine)
			}
			if strings.Contains(e.ID, "\x00") || e.Name == "" {
				t.Fatalf("invalid event %+v", e)
			}
		}
	})
}

// BenchmarkReader reads a realistic vLLM chat stream (64 content chunks) held
// in memory: the framing cost per event, without JSON decoding.
func BenchmarkReader(b *testing.B) {
	data := vllmStream(64)
	src := bytes.NewReader(data)
	r := NewReader(src, 1<<20)
	events := 0
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(data)
		*r = Reader{src: src, maxLine: r.maxLine, buf: r.buf, data: r.data, name: defaultEventName}
		for {
			if _, err := r.Next(); err != nil {
				break
			}
			events++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}
