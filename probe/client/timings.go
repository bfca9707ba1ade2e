package client

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/infer-exporter/infer_exporter/probe/observation"
)

// This file reads each engine's own timings of a request from its answer
// (observation.ServerTimings; docs/metrics.md names every field, its unit,
// its clock origin and its source). A timing is the server's word, not the
// answer: a timing member of the wrong type, null, negative, not finite or
// past its bound is absent, and never makes a frame unreadable, so that a
// server that sends garbage there loses its timings and nothing else. Each
// is a number read in place from a frame the stream reader already bounds
// (maxLineBytes): nothing here grows with what the server sends.

// maxServerMillis bounds a duration a server reports, in milliseconds: a
// day. Longer is not a request's time.
const maxServerMillis = 24 * 60 * 60 * 1000

// maxAcceptanceLength bounds speculative decoding's mean acceptance length,
// 1 + accepted draft tokens per step: no engine drafts a thousand tokens a
// step.
const maxAcceptanceLength = 1000

// boundedNumber is the JSON number raw when it is finite and in [0, limit].
func boundedNumber(raw []byte, limit float64) observation.ServerValue {
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > limit {
		return observation.ServerValue{}
	}
	return observation.ServerValue{V: f, OK: true}
}

// millis is a duration of v milliseconds, absent when v is.
func millis(v observation.ServerValue) observation.ServerDuration {
	if !v.OK {
		return observation.ServerDuration{}
	}
	return observation.ServerDuration{D: time.Duration(v.V * float64(time.Millisecond)), OK: true}
}

// scanNumber reads a timing member's value, at depth, into v: a number in
// [0, limit], else absent. A value of another type is skipped.
func (c *openAIChunk) scanNumber(v *observation.ServerValue, limit float64, depth int) error {
	*v = observation.ServerValue{}
	if b := c.peek(); b != '-' && (b < '0' || b > '9') {
		return c.skipValue(depth)
	}
	raw, err := c.number()
	if err != nil {
		return err
	}
	*v = boundedNumber(raw, limit)
	return nil
}

// scanMillis reads a member in milliseconds into d.
func (c *openAIChunk) scanMillis(d *observation.ServerDuration, depth int) error {
	var v observation.ServerValue
	err := c.scanNumber(&v, maxServerMillis, depth)
	*d = millis(v)
	return err
}

// scanVLLMMetrics reads vLLM's per-request "metrics" object (served with
// --enable-per-request-metrics, on the final usage chunk of a stream, in
// a chat or completions body, and in the Responses API's response), its
// container at depth: queue_time_ms, time_to_first_token_ms (from the
// request's scheduling), generation_time_ms (first to last token) and,
// with --per-request-spec-decode-metrics, speculative_decoding's
// mean_acceptance_length and draft_acceptance_rate.
func (c *openAIChunk) scanVLLMMetrics(t *observation.ServerTimings, depth int) error {
	var state uint8
	return c.scanObject(&state, depth, func(key []byte) error {
		switch string(key) {
		case "queue_time_ms":
			return c.scanMillis(&t.Queue, depth)
		case "time_to_first_token_ms":
			t.TTFTIncludesQueue = false
			return c.scanMillis(&t.TTFT, depth)
		case "generation_time_ms":
			return c.scanMillis(&t.Generation, depth)
		case "speculative_decoding":
			var spec uint8
			return c.scanObject(&spec, depth+1, func(key []byte) error {
				switch string(key) {
				case "mean_acceptance_length":
					return c.scanNumber(&t.AcceptanceLength, maxAcceptanceLength, depth+1)
				case "draft_acceptance_rate":
					return c.scanNumber(&t.AcceptanceRate, 1, depth+1)
				}
				return c.skipValue(depth + 1)
			})
		}
		return c.skipValue(depth)
	})
}

// scanLlamaTimings reads llama.cpp's "timings" object, which its server
// puts on the last chunk of its OpenAI and native streams, its container
// at depth: prompt_ms (the prompt's processing, to the first token) and
// predicted_ms (the generation).
func (c *openAIChunk) scanLlamaTimings(t *observation.ServerTimings, depth int) error {
	var state uint8
	return c.scanObject(&state, depth, func(key []byte) error {
		switch string(key) {
		case "prompt_ms":
			t.TTFTIncludesQueue = false
			return c.scanMillis(&t.TTFT, depth)
		case "predicted_ms":
			return c.scanMillis(&t.Generation, depth)
		}
		return c.skipValue(depth)
	})
}

// scanNvext reads Dynamo's "nvext" object, its container at depth, for its
// "timing" (sent when the request's nvext.extra_fields asks for "timing"):
// ttft_ms from the frontend's receipt of the request, so that its queue is
// in it, and total_time_ms, whose difference with ttft_ms is the
// generation.
func (c *openAIChunk) scanNvext(t *observation.ServerTimings, depth int) error {
	var state, timing uint8
	return c.scanObject(&state, depth, func(key []byte) error {
		if string(key) != "timing" {
			return c.skipValue(depth)
		}
		var ttft, total observation.ServerDuration
		err := c.scanObject(&timing, depth+1, func(key []byte) error {
			switch string(key) {
			case "ttft_ms":
				return c.scanMillis(&ttft, depth+1)
			case "total_time_ms":
				return c.scanMillis(&total, depth+1)
			}
			return c.skipValue(depth + 1)
		})
		if ttft.OK {
			t.TTFT, t.TTFTIncludesQueue = ttft, true
			if total.OK && total.D >= ttft.D {
				t.Generation = observation.ServerDuration{D: total.D - ttft.D, OK: true}
			}
		}
		return err
	})
}

// rawMillis and rawNanos read one member of a native API's frame, kept
// as json.RawMessage so that a wrong type loses the timing alone: a
// number of milliseconds (llama.cpp) or of nanoseconds (Ollama).
func rawMillis(raw json.RawMessage) observation.ServerDuration {
	return millis(rawNumber(raw, maxServerMillis))
}

func rawNanos(raw json.RawMessage) observation.ServerDuration {
	v := rawNumber(raw, maxServerMillis*1e6)
	if !v.OK {
		return observation.ServerDuration{}
	}
	return observation.ServerDuration{D: time.Duration(v.V), OK: true}
}

// rawNumber is raw as a bounded number (boundedNumber), absent when raw is
// no JSON number.
func rawNumber(raw json.RawMessage, limit float64) observation.ServerValue {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return observation.ServerValue{}
	}
	return boundedNumber(raw, limit)
}

// llamaTimings is llama.cpp's native "timings" object, its members kept
// raw (rawMillis).
type llamaTimings struct {
	PromptN    *int64          `json:"prompt_n"`
	PredictedN *int64          `json:"predicted_n"`
	PromptMS   json.RawMessage `json:"prompt_ms"`
	Predicted  json.RawMessage `json:"predicted_ms"`
}

// server is the timings' part of observation.ServerTimings.
func (l *llamaTimings) server() observation.ServerTimings {
	return observation.ServerTimings{TTFT: rawMillis(l.PromptMS), Generation: rawMillis(l.Predicted)}
}

// ollamaDurations are the durations of Ollama's final line, in nanoseconds
// from its handler's own clock: load_duration (the model's load, when it
// was not loaded), prompt_eval_duration (the prompt's evaluation) and
// eval_duration (the generation).
type ollamaDurations struct {
	Load       json.RawMessage `json:"load_duration"`
	PromptEval json.RawMessage `json:"prompt_eval_duration"`
	Eval       json.RawMessage `json:"eval_duration"`
}

// server is the durations as timings: the engine's TTFT is the load and
// the prompt's evaluation (a load Ollama did not report counts as none;
// without the prompt's evaluation there is no TTFT).
func (o *ollamaDurations) server() observation.ServerTimings {
	t := observation.ServerTimings{Generation: rawNanos(o.Eval)}
	if prompt := rawNanos(o.PromptEval); prompt.OK {
		load := rawNanos(o.Load)
		t.TTFT = observation.ServerDuration{D: load.D + prompt.D, OK: true}
	}
	return t
}

// tgiTimings reads TGI's timing headers, whole milliseconds: x-queue-time
// (queued to its batch's start). TGI's router writes them on the answers
// of /generate only, not on /generate_stream's (docs/metrics.md), and its
// x-inference-time and x-time-per-token hold the prefill with the
// generation, which no field here means: they are not read.
func tgiTimings(h http.Header) observation.ServerTimings {
	v := strings.TrimSpace(h.Get("X-Queue-Time"))
	if v == "" || len(v) > 32 {
		return observation.ServerTimings{}
	}
	return observation.ServerTimings{Queue: millis(rawNumber(json.RawMessage(v), maxServerMillis))}
}
