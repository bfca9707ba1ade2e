package simulator_test

import (
	"fmt"
	"math"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/infer-exporter/infer_exporter/internal/simulator"
)

// TestPhaseHistogramsGroundTruth: vLLM's request-phase and length
// histograms hold exactly what the engine did to each request, as its
// prefix log records it: the queue time (arrival to first admission), the
// prefill (to the first token), the decode (to the last) and the prompt
// and generated tokens, bucket by bucket. Two sequences at a time and
// twelve requests sent at once, so most of them queue.
func TestPhaseHistogramsGroundTruth(t *testing.T) {
	base, sim, client := start(t, func(c *simulator.Config) {
		c.TimeScale = 0.05 // 1 ms steps
		c.MaxNumSeqs = 2
	})
	const n = 12
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			generate(t, client, base+"/v1/completions", fmt.Sprintf("r-%d", i),
				map[string]any{"prompt": words(10+7*i, fmt.Sprint("p", i)), "max_tokens": 2 + i, "ignore_eos": true})
		}()
	}
	wg.Wait()

	var recs []simulator.PrefixRecord
	for i := range n {
		r, ok := sim.PrefixRecord(fmt.Sprintf("r-%d", i))
		if !ok || r.Finished.IsZero() || r.FirstToken.IsZero() || r.Scheduled.IsZero() {
			t.Fatalf("request %d: record %+v", i, r)
		}
		if r.Scheduled.Before(r.Arrival) || r.FirstToken.Before(r.Scheduled) || r.Finished.Before(r.FirstToken) {
			t.Fatalf("request %d: instants out of order %+v", i, r)
		}
		if r.GeneratedTokens != 2+i {
			t.Errorf("request %d: %d tokens generated, want %d", i, r.GeneratedTokens, 2+i)
		}
		recs = append(recs, r)
	}
	truth := map[string]func(r simulator.PrefixRecord) float64{
		"vllm:request_queue_time_seconds":   func(r simulator.PrefixRecord) float64 { return r.Scheduled.Sub(r.Arrival).Seconds() },
		"vllm:request_prefill_time_seconds": func(r simulator.PrefixRecord) float64 { return r.FirstToken.Sub(r.Scheduled).Seconds() },
		"vllm:request_decode_time_seconds":  func(r simulator.PrefixRecord) float64 { return r.Finished.Sub(r.FirstToken).Seconds() },
		"vllm:request_prompt_tokens":        func(r simulator.PrefixRecord) float64 { return float64(r.PromptTokens) },
		"vllm:request_generation_tokens":    func(r simulator.PrefixRecord) float64 { return float64(r.GeneratedTokens) },
	}
	mfs, err := sim.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*dto.Histogram{}
	for _, mf := range mfs {
		if len(mf.Metric) == 1 && mf.Metric[0].Histogram != nil {
			got[mf.GetName()] = mf.Metric[0].Histogram
		}
	}
	queued := 0
	for _, r := range recs {
		if r.Scheduled.After(r.Arrival) {
			queued++
		}
	}
	if queued < n/2 {
		t.Errorf("only %d of %d requests waited in the queue: the test does not test queueing", queued, n)
	}
	for name, f := range truth {
		h := got[name]
		if h == nil {
			t.Errorf("%s: not exposed", name)
			continue
		}
		if h.GetSampleCount() != n {
			t.Errorf("%s: %d observations, want %d", name, h.GetSampleCount(), n)
		}
		sum := 0.0
		for _, r := range recs {
			sum += f(r)
		}
		if math.Abs(h.GetSampleSum()-sum) > 1e-9*math.Max(1, sum) {
			t.Errorf("%s: sum %v, ground truth %v", name, h.GetSampleSum(), sum)
		}
		for _, b := range h.GetBucket() {
			var want uint64
			for _, r := range recs {
				if f(r) <= b.GetUpperBound() {
					want++
				}
			}
			if b.GetCumulativeCount() != want {
				t.Errorf("%s: bucket le=%v holds %d, ground truth %d", name, b.GetUpperBound(), b.GetCumulativeCount(), want)
			}
		}
	}
	if b := got["vllm:request_prompt_tokens"].GetBucket(); len(b) == 0 || b[0].GetUpperBound() != 1 || b[1].GetUpperBound() != 2 || b[2].GetUpperBound() != 5 {
		t.Errorf("prompt token buckets %v, want vLLM's 1, 2, 5, ...", b)
	}
}
