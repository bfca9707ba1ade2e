package simulator

import (
	"strconv"
	"time"
)

// This file answers each request with its own times in the engine, in the
// format of the engine impersonated (Config.RequestMetrics): vLLM's
// per-request "metrics" object (--enable-per-request-metrics) on the final
// usage chunk of chat and completions, in their bodies and in the
// Responses API's response; llama.cpp's prompt_ms and predicted_ms in its
// "timings"; and Ollama's prompt_eval_duration and eval_duration, which
// Ollama always sends. The times are the scheduler's own (requestTimings),
// so that a client's decomposition can be checked against the truth.

// requestTimings are a finished request's true times in the engine: from
// its arrival to the start of the step that first admitted it (its
// queue), from there to the end of the step that sampled its first token
// (its prefill), and from there to its last token.
type requestTimings struct {
	queue, prefill, decode time.Duration
	generated              int
}

// timingsFor are q's times, at now, the end of the step that sampled its
// last token.
func timingsFor(q *sequence, now time.Time) requestTimings {
	return requestTimings{
		queue:     q.scheduledAt.Sub(q.arrival),
		prefill:   q.firstTokenAt.Sub(q.scheduledAt),
		decode:    now.Sub(q.firstTokenAt),
		generated: q.generated,
	}
}

// setTimings keeps a finished request's times for its handler, before the
// engine publishes its end.
func (st *stream) setTimings(t requestTimings) {
	st.mu.Lock()
	st.timings = t
	st.mu.Unlock()
}

// finishedTimings are the times setTimings kept; zero before the request
// finished.
func (st *stream) finishedTimings() requestTimings {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.timings
}

// requestMetrics is a native protocol's copy of its request's times,
// given before its end is written (withTimings), and whether to report
// them.
type requestMetrics struct {
	on bool
	t  requestTimings
}

func (m *requestMetrics) setTimings(t requestTimings, on bool) { m.t, m.on = t, on }

// withTimings gives np its request's times, when np reports them.
func (s *Simulator) withTimings(np nativeProtocol, q *sequence) {
	if tp, ok := np.(interface{ setTimings(requestTimings, bool) }); ok {
		tp.setTimings(q.st.finishedTimings(), s.cfg.RequestMetrics)
	}
	withCached(np, q)
}

// withCached gives a protocol that reports the prompt tokens its prefix
// cache served (the Responses API's input_tokens_details, SGLang's
// meta_info.cached_tokens) the count of q's first admission.
func withCached(np nativeProtocol, q *sequence) {
	if cp, ok := np.(interface{ setCached(int) }); ok {
		cp.setCached(q.st.cachedTokens())
	}
}

// appendMillis appends d in milliseconds, to the microsecond.
func appendMillis(b []byte, d time.Duration) []byte {
	return strconv.AppendFloat(b, float64(d.Microseconds())/1000, 'f', -1, 64)
}

// appendVLLMMetrics appends vLLM's ,"metrics":{...} member: the queue, the
// time to first token from scheduling, the generation from the first to
// the last token, the mean gap between tokens (null for one token) and
// the tokens a second from scheduling to the last token.
func appendVLLMMetrics(b []byte, t requestTimings) []byte {
	b = append(b, `,"metrics":{"time_to_first_token_ms":`...)
	b = appendMillis(b, t.prefill)
	b = append(b, `,"generation_time_ms":`...)
	b = appendMillis(b, t.decode)
	b = append(b, `,"queue_time_ms":`...)
	b = appendMillis(b, t.queue)
	b = append(b, `,"mean_itl_ms":`...)
	if t.generated > 1 {
		b = appendMillis(b, t.decode/time.Duration(t.generated-1))
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"tokens_per_second":`...)
	if inference := t.prefill + t.decode; inference > 0 {
		b = strconv.AppendFloat(b, float64(t.generated)/inference.Seconds(), 'f', 3, 64)
	} else {
		b = append(b, "null"...)
	}
	return append(b, '}')
}

// appendLlamaMillis appends llama.cpp's ,"prompt_ms":...,"predicted_ms":...
// members of its timings object.
func appendLlamaMillis(b []byte, t requestTimings) []byte {
	b = append(b, `,"prompt_ms":`...)
	b = appendMillis(b, t.prefill)
	b = append(b, `,"predicted_ms":`...)
	return appendMillis(b, t.decode)
}

// appendRequestMetrics appends q's times to an OpenAI chunk or body, in
// the format of the engine impersonated, when Config.RequestMetrics asks
// for them: llama.cpp's "timings", vLLM's "metrics" for the others but
// Ollama, whose OpenAI API reports none.
func (s *Simulator) appendRequestMetrics(b []byte, q *sequence, prompt int) []byte {
	if !s.cfg.RequestMetrics {
		return b
	}
	t := q.st.finishedTimings()
	switch s.cfg.Engine {
	case EngineOllama:
		return b
	case EngineLlamaCpp:
		b = append(b, `,"timings":{"prompt_n":`...)
		b = strconv.AppendInt(b, int64(prompt), 10)
		b = append(b, `,"predicted_n":`...)
		b = strconv.AppendInt(b, int64(t.generated), 10)
		return append(appendLlamaMillis(b, t), '}')
	}
	return appendVLLMMetrics(b, t)
}
