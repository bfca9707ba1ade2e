package workload

import (
	//DELETEME
	"regexp"
	//DELETEME
	//DELETEME
	"testing"
	"time"

	//DELETEME
	//DELETEME

	"github.com/infer-exporter/infer_exporter/internal/config"
	// DELETEME
	// DELETEME
)

func check(prompt, expect string, every int, interval time.Duration) config.Check {
	return config.Check{
		KnownAnswer: config.KnownAnswer{Prompt: prompt, Expect: expect, MaxTokens: 8, Pattern: regexp.MustCompile(expect)},
		Every:       every, Interval: interval,
	}
}

func TestCheckScheduleEveryN(t *testing.T) {
	s := newCheckSchedule([]config.Check{check("a", "x", 3, 0), check("b", "x", 2, 0)})
	t0 := time.Unix(0, 0)
	var got []int
	for n := 1; n <= 7; n++ {
		i := s.arrive(t0)
		got = append(got, i)
		if i >= 0 && n != 6 { // arrival 6 is dropped: its check stays due
			s.sent(i, t0)
		}
	}
	// Arrival 2: b. 3: a. 4: b. 5: none. 6: a and b due, a first, dropped.
	// 7: a still due (b too: it waits behind a).
	want := []int{-1, 1, 0, 1, -1, 0, 0}
	for n := range want {
		if got[n] != want[n] {
			t.Fatalf("checks per arrival = %v, want %v", got, want)
		}
	}
	if i := s.arrive(t0); i != 1 {
		t.Errorf("arrival 8 carries %d, want b (1), due since arrival 6", i)
	}
}

func TestCheckScheduleInterval(t *testing.T) {
	s := newCheckSchedule([]config.Check{check("a", "x", 0, 10*time.Millisecond)})
	t0 := time.Unix(100, 0)
	var sentAt []time.Duration
	for off := time.Duration(0); off <= 40*time.Millisecond; off += 4 * time.Millisecond {
		if i := s.arrive(t0.Add(off)); i >= 0 {
			s.sent(i, t0.Add(off))
			sentAt = append(sentAt, off)
		}
	}
	// The first arrival, then the first arrival at least 10ms after the
	// previous check: 0, 12, 24, 36.
	want := []time.Duration{0, 12 * time.Millisecond, 24 * time.Millisecond, 36 * time.Millisecond}
	if len(sentAt) != len(want) {
		t.Fatalf("checks at %v, want %v", sentAt, want)
	}
	for i := range want {
		if sentAt[i] != want[i] {
			t.Fatalf("checks at %v, want %v", sentAt, want)
		}
	}
}

// BenchmarkCheckScheduleArrive is the cost a workload with checks adds to
// each arrival on the dispatcher's path.
func BenchmarkCheckScheduleArrive(b *testing.B) {
	s := newCheckSchedule([]config.Check{check("a", "x", 100, 0), check("b", "x", 0, time.Minute)})
	at := time.Unix(0, 0)
	b.ReportAllocs()
	for b.Loop() {
		at = at.Add(10 * time.Millisecond)
		if i := s.arrive(at); i >= 0 {
			s.sent(i, at)
		}
	}
}
