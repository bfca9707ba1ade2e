package client

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// decodeTimings reads body through f's decoder as the client does and
// returns the timings its frames carried, merged, and whether it ended.
func decodeTimings(t *testing.T, f Flavor, header http.Header, body string) (observation.ServerTimings, bool) {
	t.Helper()
	if header == nil {
		header = http.Header{"Content-Type": {"text/event-stream"}}
	}
	dec := f.NewDecoder(strings.NewReader(body), header, 1<<20)
	var got observation.ServerTimings
	var ch Chunk
	for {
		if err := dec.Next(); err != nil {
			if err != io.EOF {
				t.Fatalf("Next: %v", err)
			}
			return got, false
		}
		ch.Reset()
		if err := dec.Decode(&ch); err != nil {
			t.Fatalf("Decode: %v", err)
		}
		got.Merge(&ch.Server)
		if ch.Done {
			return got, true
		}
	}
}

func ms(v float64) observation.ServerDuration {
	return observation.ServerDuration{D: time.Duration(v * float64(time.Millisecond)), OK: true}
}

func val(v float64) observation.ServerValue { return observation.ServerValue{V: v, OK: true} }

// vllmFinal is vLLM's final usage chunk with the metrics object given.
func vllmFinal(metrics string) string {
	return data(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4},"metrics":` + metrics + `}`)
}

// TestServerTimingsParse reads each engine's timings as it sends them, and
// loses only the timing, never the answer, to a member that is null,
// absent, of the wrong type, negative, not finite or past a day.
func TestServerTimingsParse(t *testing.T) {
	huge := strings.Repeat("9", 400)
	stream := chatContent("a") + chatContent(" b")
	for _, tc := range []struct {
		name   string
		flavor Flavor
		header http.Header
		body   string
		want   observation.ServerTimings
	}{
		{"vllm chat", OpenAIChat, nil,
			stream + vllmFinal(`{"time_to_first_token_ms":55.0,"generation_time_ms":1240.5,"queue_time_ms":90,"mean_itl_ms":9.1,"tokens_per_second":103.2}`) + done,
			observation.ServerTimings{Queue: ms(90), TTFT: ms(55), Generation: ms(1240.5)}},
		{"vllm spec decoding", OpenAIChat, nil,
			stream + vllmFinal(`{"queue_time_ms":1,"time_to_first_token_ms":2,"generation_time_ms":3,"speculative_decoding":{"mean_acceptance_length":1.2325581395348837,"draft_acceptance_rate":0.07751937984496124,"acceptance_histogram":[39,1,0,3],"acceptance_histogram_by_draft_length":{"3":[39,1,0,3]},"num_spec_steps":43}}`) + done,
			observation.ServerTimings{Queue: ms(1), TTFT: ms(2), Generation: ms(3), AcceptanceLength: val(1.2325581395348837), AcceptanceRate: val(0.07751937984496124)}},
		{"vllm all null", OpenAIChat, nil,
			stream + vllmFinal(`{"time_to_first_token_ms":null,"generation_time_ms":null,"queue_time_ms":null,"mean_itl_ms":null,"speculative_decoding":null}`) + done,
			observation.ServerTimings{}},
		{"vllm metrics null (n > 1)", OpenAIChat, nil, stream + vllmFinal(`null`) + done, observation.ServerTimings{}},
		{"vllm no metrics", OpenAIChat, nil, stream + usageChunk(5, 2) + done, observation.ServerTimings{}},
		{"vllm garbage", OpenAIChat, nil,
			stream + vllmFinal(`{"queue_time_ms":"90","time_to_first_token_ms":-1,"generation_time_ms":[1],"speculative_decoding":{"mean_acceptance_length":{},"draft_acceptance_rate":1.5}}`) + done,
			observation.ServerTimings{}},
		{"vllm huge", OpenAIChat, nil,
			stream + vllmFinal(`{"queue_time_ms":`+huge+`,"time_to_first_token_ms":1e308,"generation_time_ms":86400001}`) + done,
			observation.ServerTimings{}},
		{"vllm metrics not an object", OpenAIChat, nil, stream + vllmFinal(`"fast"`) + done, observation.ServerTimings{}},
		{"vllm completions", OpenAICompletions, nil,
			completionText("a") + vllmFinal(`{"queue_time_ms":0.5,"time_to_first_token_ms":12.25}`) + done,
			observation.ServerTimings{Queue: ms(0.5), TTFT: ms(12.25)}},
		{"vllm not streamed", OpenAIChat, http.Header{"Content-Type": {"application/json"}},
			`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":1,"completion_tokens":1},"metrics":{"queue_time_ms":12.3,"time_to_first_token_ms":85.2,"generation_time_ms":1240.5}}`,
			observation.ServerTimings{Queue: ms(12.3), TTFT: ms(85.2), Generation: ms(1240.5)}},
		{"vllm responses", OpenAIResponses, nil,
			"event: response.output_text.delta\n" + data(`{"type":"response.output_text.delta","delta":"hi"}`) +
				"event: response.completed\n" + data(`{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":1,"output_tokens":1},"metrics":{"queue_time_ms":3,"time_to_first_token_ms":4,"generation_time_ms":5}}}`),
			observation.ServerTimings{Queue: ms(3), TTFT: ms(4), Generation: ms(5)}},
		{"vllm responses garbage", OpenAIResponses, nil,
			"event: response.completed\n" + data(`{"type":"response.completed","response":{"status":"completed","metrics":{"queue_time_ms":true}}}`),
			observation.ServerTimings{}},
		{"dynamo nvext", OpenAIChat, nil,
			stream + data(`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2},"nvext":{"worker_id":"w","timing":{"request_received_ms":1760000000000,"ttft_ms":140.5,"total_time_ms":300}}}`) + done,
			observation.ServerTimings{TTFT: ms(140.5), TTFTIncludesQueue: true, Generation: ms(159.5)}},
		{"dynamo nvext garbage", OpenAIChat, nil,
			stream + data(`{"choices":[],"nvext":{"timing":{"ttft_ms":"x","total_time_ms":5}}}`) + done,
			observation.ServerTimings{}},
		{"llama.cpp native", LlamaCpp, nil,
			data(`{"content":"a","stop":false}`) + data(`{"content":"","stop":true,"tokens_predicted":2,"tokens_evaluated":3,"timings":{"cache_n":0,"prompt_n":3,"prompt_ms":120,"predicted_n":2,"predicted_ms":30.5}}`),
			observation.ServerTimings{TTFT: ms(120), Generation: ms(30.5)}},
		{"llama.cpp native garbage", LlamaCpp, nil,
			data(`{"content":"a","stop":false}`) + data(`{"content":"","stop":true,"tokens_predicted":2,"timings":{"prompt_n":3,"prompt_ms":"120","predicted_ms":null}}`),
			observation.ServerTimings{}},
		{"llama.cpp native huge", LlamaCpp, nil,
			data(`{"content":"","stop":true,"tokens_predicted":0,"timings":{"prompt_ms":` + huge + `,"predicted_ms":-0.0001}}`),
			observation.ServerTimings{}},
		{"ollama", OllamaGenerate, nil,
			`{"response":"a","done":false}` + "\n" + `{"response":"","done":true,"total_duration":300000000,"load_duration":5000000,"prompt_eval_count":3,"prompt_eval_duration":115000000,"eval_count":2,"eval_duration":100000000}` + "\n",
			observation.ServerTimings{TTFT: ms(120), Generation: ms(100)}},
		{"ollama no load", OllamaChat, nil,
			`{"message":{"content":"a"},"done":true,"prompt_eval_duration":7000000,"eval_duration":null}` + "\n",
			observation.ServerTimings{TTFT: ms(7)}},
		{"ollama garbage", OllamaGenerate, nil,
			`{"response":"a","done":true,"load_duration":"5","prompt_eval_duration":{},"eval_duration":-3}` + "\n",
			observation.ServerTimings{}},
		{"tgi headers", TGI, http.Header{"Content-Type": {"text/event-stream"}, "X-Queue-Time": {"90"}, "X-Inference-Time": {"300"}},
			data(`{"index":1,"token":{"id":1,"text":"a","special":false},"generated_text":"a","details":{"generated_tokens":1}}`),
			observation.ServerTimings{Queue: ms(90)}},
		{"tgi garbage header", TGI, http.Header{"Content-Type": {"text/event-stream"}, "X-Queue-Time": {"ninety"}},
			data(`{"index":1,"token":{"id":1,"text":"a","special":false},"generated_text":"a","details":{"generated_tokens":1}}`),
			observation.ServerTimings{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ended := decodeTimings(t, tc.flavor, tc.header, tc.body)
			if !ended {
				t.Fatal("the stream did not end")
			}
			if got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestServerTimingsRecorded reads the timings of recorded answers: a
// llama.cpp server's OpenAI stream (b5517) and Ollama 0.17.4's /api/chat
// (testdata/SOURCES.md).
func TestServerTimingsRecorded(t *testing.T) {
	for _, tc := range []struct {
		file   string
		flavor Flavor
		want   observation.ServerTimings
	}{
		{"stream_openai_chat_llamacpp.sse", OpenAIChat, observation.ServerTimings{TTFT: ms(239.618), Generation: ms(680.938)}},
		{"ollama_api_chat_stream.ndjson", OllamaChat, observation.ServerTimings{
			TTFT:       observation.ServerDuration{D: 4900427 + 131052152, OK: true},
			Generation: observation.ServerDuration{D: 472395347, OK: true}}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			body, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			// The llama.cpp capture has a literal "..." line where its
			// author cut chunks; it is not JSON and is left out here.
			text := strings.ReplaceAll(string(body), "...\n", "")
			got, _ := decodeTimings(t, tc.flavor, nil, text)
			if got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestServerTimingsDerived: the engine's share of the first token and the
// client's overhead, by each engine's clock origin.
func TestServerTimingsDerived(t *testing.T) {
	sched := time.Unix(100, 0)
	req := func(s observation.ServerTimings) *observation.Request {
		return &observation.Request{Scheduled: sched, FirstToken: sched.Add(150 * time.Millisecond), Server: s}
	}
	for _, tc := range []struct {
		name     string
		s        observation.ServerTimings
		overhead time.Duration
		result   string
	}{
		{"vllm", observation.ServerTimings{Queue: ms(90), TTFT: ms(55)}, 5 * time.Millisecond, observation.TimingsDecomposed},
		{"llama.cpp", observation.ServerTimings{TTFT: ms(120)}, 30 * time.Millisecond, observation.TimingsDecomposed},
		{"dynamo", observation.ServerTimings{Queue: ms(90), TTFT: ms(140), TTFTIncludesQueue: true}, 10 * time.Millisecond, observation.TimingsDecomposed},
		{"rounded past the client", observation.ServerTimings{TTFT: ms(151)}, -time.Millisecond, observation.TimingsDecomposed},
		{"tgi queue only", observation.ServerTimings{Queue: ms(90)}, 0, observation.TimingsPartial},
		{"none", observation.ServerTimings{}, 0, observation.TimingsAbsent},
	} {
		r := req(tc.s)
		got, ok := r.ClientOverhead()
		if ok != (tc.result == observation.TimingsDecomposed) || got != tc.overhead {
			t.Errorf("%s: overhead %v %v, want %v", tc.name, got, ok, tc.overhead)
		}
		if res := r.TimingsResult(); res != tc.result {
			t.Errorf("%s: result %q, want %q", tc.name, res, tc.result)
		}
	}
}
