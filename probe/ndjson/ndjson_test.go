package ndjson

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func readAll(r *Reader) (lines []string, err error) {
	for {
		line, err := r.Next()
		if err != nil {
			if line != nil {
				lines = append(lines, "PARTIAL:"+string(line))
			}
			return lines, err
		}
		lines = append(lines, string(line))
	}
}

func TestReader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		max     int
		want    []string
		err     error
		onebyte bool
	}{
		{name: "lines", in: "{\"a\":1}\n{\"b\":2}\n", max: 100, want: []string{`{"a":1}`, `{"b":2}`}, err: io.EOF},
		{name: "crlf and blank lines", in: "\n{\"a\":1}\r\n\r\n  \n{\"b\":2}\r\n", max: 100, want: []string{`{"a":1}`, `{"b":2}`}, err: io.EOF},
		{name: "empty", in: "", max: 100, err: io.EOF},
		{name: "final line without newline", in: "{\"a\":1}\n{\"done\":true}", max: 100, want: []string{`{"a":1}`, `PARTIAL:{"done":true}`}, err: io.ErrUnexpectedEOF},
		{name: "line at the limit", in: "12345\n123456\n", max: 5, want: []string{"12345"}, err: ErrLineTooLong},
		{name: "line at the limit with CR", in: "12345\r\n", max: 5, want: []string{"12345"}, err: io.EOF},
		{name: "unterminated long line", in: strings.Repeat("x", 50), max: 10, err: ErrLineTooLong},
		{name: "one byte reads", in: "{\"a\":1}\r\n{\"b\":2}\n", max: 100, want: []string{`{"a":1}`, `{"b":2}`}, err: io.EOF, onebyte: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var src io.Reader = strings.NewReader(tc.in)
			if tc.onebyte {
				src = iotest.OneByteReader(src)
			}
			r := NewReader(src, tc.max)
			got, err := readAll(r)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("lines = %q, want %q", got, tc.want)
			}
			if tc.err == ErrLineTooLong {
				if _, err := r.Next(); err != ErrLineTooLong {
					t.Fatalf("ErrLineTooLong is not sticky: %v", err)
				}
			}
		})
	}
}

func TestReadErrorAfterCompleteLines(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("{\"a\":1}\n{\"b"), iotest.ErrReader(boom)), 100)
	got, err := readAll(r)
	if err != boom || len(got) != 1 || got[0] != `{"a":1}` {
		t.Fatalf("got %q, %v; want one line then boom", got, err)
	}
}

// TestNoAllocationPerLine checks the reader reuses its buffer once warm.
func TestNoAllocationPerLine(t *testing.T) {
	body := strings.Repeat("{\"model\":\"tiny\",\"response\":\"q\",\"done\":false}\n", 1000)
	allocs := testing.AllocsPerRun(10, func() {
		r := NewReader(strings.NewReader(body), 1<<20)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	})
	// The reader and its buffer, and strings.Reader: a handful per stream,
	// not per line.
	if allocs > 5 {
		t.Fatalf("%v allocations per 1000-line stream", allocs)
	}
}
