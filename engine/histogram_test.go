package engine

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var histNames = [numHistQuantities]string{"ttft", "queue", "prefill", "decode", "prompt_tokens", "generation_tokens"}

// wantHist is what a test expects of one normalised histogram: its count,
// sum, number of finite buckets and some of their cumulative counts.
type wantHist struct {
	count   uint64
	sum     float64
	buckets int
	at      map[float64]uint64
}

// checkHistograms: the histograms listed are present with those figures,
// every other one absent.
func checkHistograms(t *testing.T, got values, w map[histQuantity]wantHist) {
	t.Helper()
	for h := histQuantity(0); h < numHistQuantities; h++ {
		g := got.hist[h]
		wh, wantOK := w[h]
		if g.OK != wantOK {
			t.Errorf("%s: present=%v, want present=%v", histNames[h], g.OK, wantOK)
			continue
		}
		if !wantOK {
			if g.Count != 0 || g.Sum != 0 || len(g.Buckets) != 0 {
				t.Errorf("%s: absent but holds %+v", histNames[h], g)
			}
			continue
		}
		if g.Count != wh.count || g.Sum != wh.sum || len(g.Buckets) != wh.buckets {
			t.Errorf("%s: count %d sum %v buckets %d, want %d %v %d", histNames[h], g.Count, g.Sum, len(g.Buckets), wh.count, wh.sum, wh.buckets)
		}
		for ub, c := range wh.at {
			found := false
			for _, b := range g.Buckets {
				if b.UpperBound == ub {
					found = true
					if b.Count != c {
						t.Errorf("%s: bucket le=%v = %d, want %d", histNames[h], ub, b.Count, c)
					}
				}
			}
			if !found {
				t.Errorf("%s: no bucket le=%v in %+v", histNames[h], ub, g.Buckets)
			}
		}
	}
}

// checkFinished: the reasons listed are present with those counts, every
// other one absent.
func checkFinished(t *testing.T, got values, w map[string]float64) {
	t.Helper()
	for i, r := range reasons {
		wv, wantOK := w[r]
		switch {
		case got.hasFinished[i] != wantOK:
			t.Errorf("finished{reason=%s}: present=%v, want present=%v", r, got.hasFinished[i], wantOK)
		case wantOK && got.finished[i] != wv:
			t.Errorf("finished{reason=%s} = %v, want %v", r, got.finished[i], wv)
		}
	}
}

// TestRecordedHistograms: the per-request histograms and finish reasons
// of every recorded scrape, read with the engine's own buckets; what a
// scrape lacks is absent, never zero.
func TestRecordedHistograms(t *testing.T) {
	for _, tc := range []struct {
		file, engine, model string
		hist                map[histQuantity]wantHist
		finished            map[string]float64
	}{
		{"metrics_vllm_v1.txt", engineVLLM, "facebook/opt-125m",
			map[histQuantity]wantHist{
				hTTFT:             {1, 0.31326723098754883, 16, map[float64]uint64{0.25: 0, 0.5: 1, 10: 1}},
				hQueueTime:        {6, 7.358146831393242e-05, 1, map[float64]uint64{0.3: 6}},
				hPrefillTime:      {6, 0.2140041133388877, 1, map[float64]uint64{0.3: 6}},
				hDecodeTime:       {6, 0.6237391703762114, 1, map[float64]uint64{0.3: 6}},
				hPromptTokens:     {1, 5, 11, map[float64]uint64{2: 0, 5: 1, 2000: 1}},
				hGenerationTokens: {1, 7, 11, map[float64]uint64{5: 0, 10: 1}},
			},
			// The scrape has only the length series: stop, abort and the
			// others are absent, not zero.
			map[string]float64{"length": 1}},
		// The pre-0.10 excerpt holds none of these families.
		{"metrics_vllm_legacy_excerpt.txt", engineVLLM, "facebook/opt-125m", nil, nil},
		// Older SGLang: TTFT only (no queue-time histogram, no length
		// histograms, which need --collect-tokens-histogram).
		{"metrics_sglang.txt", engineSGLang, "meta-llama/Llama-3.1-8B-Instruct",
			map[histQuantity]wantHist{
				hTTFT: {11008, 2.3518979474117756e+06, 20, map[float64]uint64{0.02: 0, 0.04: 1, 1: 27, 30: 2513}},
			}, nil},
		// The recorded prefix ends before tgi_request_generated_tokens.
		{"metrics_tgi.txt", engineTGI, "",
			map[histQuantity]wantHist{
				hQueueTime:    {109, 295.275961956, 35, nil},
				hPromptTokens: {109, 662, 100, map[float64]uint64{5.11: 0, 10.22: 109}},
			}, nil},
		{"metrics_triton_trtllm.txt", engineTriton, "ensemble", nil, nil},
	} {
		t.Run(tc.file, func(t *testing.T) {
			vs := normalize(tc.engine, parseFile(t, tc.file), tc.model)
			checkHistograms(t, vs, tc.hist)
			checkFinished(t, vs, tc.finished)
		})
	}
}

func parseText(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// TestHistogramAggregation: series of the same buckets add bucket by
// bucket over data-parallel ranks, tensor-parallel copies and other models
// are left out, buckets that disagree keep only the bounds they share, and
// a series that is not a histogram makes the whole one absent.
func TestHistogramAggregation(t *testing.T) {
	const head = "# TYPE vllm:request_queue_time_seconds histogram\n"
	series := func(labels string, bounds []string, counts []int, count int, sum string) string {
		var b strings.Builder
		for i, ub := range bounds {
			b.WriteString("vllm:request_queue_time_seconds_bucket{" + labels + `,le="` + ub + `"} ` + itoa(counts[i]) + "\n")
		}
		b.WriteString("vllm:request_queue_time_seconds_bucket{" + labels + `,le="+Inf"} ` + itoa(count) + "\n")
		b.WriteString("vllm:request_queue_time_seconds_count{" + labels + "} " + itoa(count) + "\n")
		b.WriteString("vllm:request_queue_time_seconds_sum{" + labels + "} " + sum + "\n")
		return b.String()
	}
	three := []string{"0.1", "0.5", "1"}
	for _, tc := range []struct {
		name string
		text string
		want map[histQuantity]wantHist
	}{
		{"data-parallel ranks add, tp rank 1 and model b do not",
			head + series(`model_name="a",engine="0",tp_rank="0"`, three, []int{1, 2, 3}, 4, "1.5") +
				series(`model_name="a",engine="1",tp_rank="0"`, three, []int{0, 5, 5}, 6, "2") +
				series(`model_name="a",engine="0",tp_rank="1"`, three, []int{1, 2, 3}, 4, "1.5") +
				series(`model_name="b",engine="0",tp_rank="0"`, three, []int{100, 100, 100}, 100, "9"),
			map[histQuantity]wantHist{hQueueTime: {10, 3.5, 3, map[float64]uint64{0.1: 1, 0.5: 7, 1: 8}}}},
		{"buckets that disagree keep the bounds both have",
			head + series(`model_name="a",engine="0"`, three, []int{1, 2, 3}, 4, "1") +
				series(`model_name="a",engine="1"`, []string{"0.5", "2"}, []int{1, 3}, 3, "2"),
			map[histQuantity]wantHist{hQueueTime: {7, 3, 1, map[float64]uint64{0.5: 3}}}},
		{"no shared finite bound: count and sum alone",
			head + series(`model_name="a",engine="0"`, []string{"0.1"}, []int{1}, 2, "1") +
				series(`model_name="a",engine="1"`, []string{"0.2"}, []int{1}, 2, "1"),
			map[histQuantity]wantHist{hQueueTime: {4, 2, 0, nil}}},
		{"falling cumulative counts: absent",
			head + series(`model_name="a",engine="0"`, three, []int{1, 2, 3}, 4, "1") +
				series(`model_name="a",engine="1"`, three, []int{3, 2, 3}, 4, "1"),
			nil},
		{"a bucket above the count: absent",
			head + series(`model_name="a"`, three, []int{1, 2, 5}, 4, "1"), nil},
		{"a count that is not whole: absent",
			head + strings.Replace(series(`model_name="a"`, three, []int{1, 2, 3}, 4, "1"), `le="0.1"} 1`, `le="0.1"} 1.5`, 1), nil},
		{"a NaN sum: absent",
			head + series(`model_name="a"`, three, []int{1, 2, 3}, 4, "NaN"), nil},
		{"declared a gauge: absent",
			"# TYPE vllm:request_queue_time_seconds gauge\nvllm:request_queue_time_seconds{model_name=\"a\"} 3\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkHistograms(t, normalize(engineVLLM, parseText(t, tc.text), "a"), tc.want)
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestFinishReasons: vLLM's finished_reason values map onto the fixed
// set; a value outside it, or a series without the label, is other; DP
// ranks add.
func TestFinishReasons(t *testing.T) {
	text := `# TYPE vllm:request_success_total counter
vllm:request_success_total{finished_reason="stop",model_name="a",engine="0"} 5
vllm:request_success_total{finished_reason="stop",model_name="a",engine="1"} 2
vllm:request_success_total{finished_reason="length",model_name="a",engine="0"} 3
vllm:request_success_total{finished_reason="abort",model_name="a",engine="0"} 1
vllm:request_success_total{finished_reason="error",model_name="a",engine="0"} 4
vllm:request_success_total{finished_reason="repetition",model_name="a",engine="0"} 6
vllm:request_success_total{finished_reason="something new",model_name="a",engine="0"} 7
vllm:request_success_total{model_name="a",engine="2"} 8
vllm:request_success_total{finished_reason="stop",model_name="b",engine="0"} 100
`
	checkFinished(t, normalize(engineVLLM, parseText(t, text), "a"),
		map[string]float64{"stop": 7, "length": 3, "abort": 1, "error": 4, "other": 21})
	// An engine without a reason counter has none.
	checkFinished(t, normalize(engineSGLang, parseText(t, text), "a"), nil)
}

// TestCollectHistograms: the histograms are rendered as classic
// histograms with the engine's bounds, the reasons as counters, and what
// the engine lacks is absent.
func TestCollectHistograms(t *testing.T) {
	vs := normalize(engineVLLM, parseFile(t, "metrics_vllm_v1.txt"), "facebook/opt-125m")
	sm := NewScraper(nil)
	sc := &targetScraper{parent: sm}
	sc.snap.Store(&serverSnapshot{target: "v", engine: engineVLLM, model: "m", up: true, values: vs})
	sm.scrapers["v"] = sc
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(sm)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		got[mf.GetName()] = mf
	}
	for h, nh := range histogramSeries {
		mf := got["infer_server_"+nh.name]
		if mf == nil || mf.GetType() != dto.MetricType_HISTOGRAM || len(mf.Metric) != 1 {
			t.Fatalf("infer_server_%s: %v", nh.name, mf)
		}
		m := mf.Metric[0].GetHistogram()
		want := vs.hist[h]
		if m.GetSampleCount() != want.Count || m.GetSampleSum() != want.Sum {
			t.Errorf("%s: count %d sum %v, want %d %v", nh.name, m.GetSampleCount(), m.GetSampleSum(), want.Count, want.Sum)
		}
		var finite []*dto.Bucket
		for _, b := range m.GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) {
				finite = append(finite, b)
			}
		}
		if len(finite) != len(want.Buckets) {
			t.Fatalf("%s: %d buckets, want %d", nh.name, len(finite), len(want.Buckets))
		}
		for i, b := range finite {
			if b.GetUpperBound() != want.Buckets[i].UpperBound || b.GetCumulativeCount() != want.Buckets[i].Count {
				t.Errorf("%s: bucket %d le=%v %d, want %+v", nh.name, i, b.GetUpperBound(), b.GetCumulativeCount(), want.Buckets[i])
			}
		}
	}
	fin := got["infer_server_requests_finished_total"]
	if fin == nil || len(fin.Metric) != 1 {
		t.Fatalf("finished: %v", fin)
	}
	if r, _ := labelValue(fin.Metric[0], "reason"); r != "length" || fin.Metric[0].GetCounter().GetValue() != 1 {
		t.Errorf("finished: %v", fin.Metric[0])
	}

	// A scrape without the families: none of the series.
	sc.snap.Store(&serverSnapshot{target: "v", engine: engineTGI, model: "m", up: true,
		values: normalize(engineTGI, parseFile(t, "metrics_tgi.txt"), "")})
	mfs, err = reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch n := mf.GetName(); n {
		case "infer_server_request_queue_time_seconds", "infer_server_request_prompt_tokens":
		default:
			if mf.GetType() == dto.MetricType_HISTOGRAM || n == "infer_server_requests_finished_total" {
				t.Errorf("TGI scrape renders %s", n)
			}
		}
	}
}
