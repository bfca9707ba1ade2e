// Package prober serves /probe, the one-shot probe of blackbox_exporter's
// convention: a scrape of GET /probe?target=URL&module=NAME runs the module
// once against URL and answers with that probe's metrics only, gathered
// from a registry made for it. It measures with the same client, the same
// transport (--probe.transport: probe/client/h1 for http and https
// targets by default) and the same observation record as the continuous
// probe (package workload), so both tell the same truth about a request;
// only the client's dials go through the probe's allow list (see Safety).
//
// # Parameters
//
//   - target (required): an absolute http:// or https:// URL, the server's
//     root or its /v1, without credentials, query or fragment.
//   - module (required): a module of the configuration's modules:.
//   - debug=true: answer with a readable log of the probe, the metrics it
//     would have returned and the module's configuration.
//
// A missing module or target, an unknown module and a bad
// X-Prometheus-Scrape-Timeout-Seconds are answered 400 and counted in
// infer_exporter_probe_requests_invalid_total. A target that is refused (bad
// spelling, allow list) is answered 200 with probe_success 0, its reason
// in probe_failed_due_to and the debug log, and counted too.
//
// The probe's deadline is the scrape timeout that Prometheus sends in
// X-Prometheus-Scrape-Timeout-Seconds (120s without it) minus
// --timeout-offset, capped by the module's timeout.
//
// # Metrics
//
// Every answer has probe_success, probe_duration_seconds,
// probe_timeout_seconds, probe_failed_due_to{reason} (1 for the reason of a
// failure, 0 for the others; reasons in Reasons), probe_http_status_code,
// probe_requests{outcome} (every outcome of package observation, summing to
// the module's request count), probe_http_errors{code} (the requests
// answered with a non-2xx status by code, every code of
// observation.StatusCodes: 400 ... 504 and other), probe_goodput_requests
// (succeeded and met the SLO), probe_output_tokens and
// probe_reasoning_tokens. When the values exist:
//
//   - summaries over the probe's requests, with exact nearest-rank
//     quantiles 0.5, 0.9, 0.99 and 1 (the maximum), _sum and _count:
//     probe_time_to_first_token_seconds,
//     probe_time_to_first_answer_token_seconds,
//     probe_time_per_output_token_seconds, probe_e2e_latency_seconds,
//     probe_inter_token_latency_seconds. A p99 alert reads
//     probe_time_to_first_token_seconds{quantile="0.99"}; with fewer than
//     100 requests that is the maximum.
//   - per request (request="0".."n-1", n <= 100): probe_request_success,
//     probe_request_time_to_first_token_seconds,
//     probe_request_time_to_first_answer_token_seconds,
//     probe_request_time_per_output_token_seconds,
//     probe_request_e2e_latency_seconds, probe_request_output_tokens.
//   - probe_output_tokens_per_second: output tokens of the successful
//     requests over the time from the first of them sent to the last
//     finished.
//   - the engine's own timings of the successful requests, as their
//     answers reported them (docs/metrics.md), as summaries:
//     probe_server_queue_seconds,
//     probe_server_time_to_first_token_seconds,
//     probe_server_generation_seconds, probe_client_overhead_seconds (the
//     client's TTFT less the engine's queue and TTFT),
//     probe_server_spec_decode_acceptance_length and _rate; and always
//     probe_server_timings{result} (decomposed, partial, absent).
//   - for modules with known-answer checks: probe_known_answer_success and
//     probe_known_answer_check_success{check="0".."k-1"}.
//   - when the probe's requests were traced (Options.Spans: the OTLP spans,
//     or trace contexts alone), the TTFT, TPOT, ITL and E2E figures again as histograms,
//     with the continuous probe's buckets, whose buckets carry exemplars:
//     probe_time_to_first_token_histogram_seconds,
//     probe_time_per_output_token_histogram_seconds,
//     probe_inter_token_latency_histogram_seconds,
//     probe_e2e_latency_histogram_seconds. A bucket's exemplar is the last
//     request (in request order) whose value fell in it: the trace_id and
//     span_id of the traceparent it was sent with, its value and the
//     instant it was measured. OpenMetrics allows exemplars on a
//     histogram's buckets but not on a summary or a gauge; they show in the
//     OpenMetrics text, which the answer is in when the scraper asks for
//     it, as Prometheus does, and in the protobuf exposition.
//
// As in the continuous probe, TTFT counts every request that got a token,
// and TPOT, E2E and tokens count successful requests only.
//
// A module of kind perplexity (perplexity.go) sends no generations: it
// scores the quality package's reference text once, as one request under
// the same allow list and ceilings, and answers with the common series
// (probe_success, probe_duration_seconds, probe_timeout_seconds,
// probe_failed_due_to, probe_http_status_code) and probe_perplexity{text},
// probe_perplexity_tokens{text}, probe_perplexity_max and
// probe_perplexity_failed_due_to{reason}. It fails with request_failed when
// the score fails, and with perplexity_exceeded when the perplexity is
// above the module's max_perplexity.
//
// Reasoning models: TTFT is the first token of any kind, reasoning
// included; the time to first answer token is the first content that is
// not reasoning only (reasoning_content, reasoning, Ollama thinking), and
// counts every request that got one. For a model that does not reason the
// two are equal. probe_reasoning_tokens sums, over the successful
// requests, the server's count of reasoning tokens (usage
// completion_tokens_details.reasoning_tokens) or, for a request whose
// server sent none, its reasoning-only content events. Reasoning tokens
// are output tokens: probe_output_tokens includes them. Latencies start
// when the per-target rate ceiling let the request go, and a probe's first
// request includes connecting (DNS, TCP, TLS): each probe has its own
// connections, which die with it. Each probe draws new prompts (the
// module's seed plus the probe's sequence number), so that a server's
// prefix cache does not answer a probe with the previous probe's prompt;
// known-answer prompts are the configured ones, every time.
//
// # Safety
//
// An open /probe lets whoever reaches the exporter make it send requests
// (server-side request forgery) and heavy ones (load amplification).
// Therefore:
//
//   - Targets are parsed strictly: http and https only; no userinfo,
//     query or fragment; host names of letters, digits, '-', '_' and '.';
//     and no host whose last label is a number, which some resolver would
//     read as an IPv4 address in another spelling (2852039166,
//     0251.0376.0251.0376, 0xa9fea9fe and 127.1 are 169.254.169.254 and
//     127.0.0.1 to glibc's getaddrinfo; Go's parser rejects them, so the
//     two would disagree).
//   - The allow list (probe.allow in the configuration) admits the host
//     and port of configured targets (by default), host name patterns and
//     CIDRs. The dialer resolves names itself and checks every address it
//     is about to connect to, in net.Dialer's Control hook, after DNS and
//     right before connect(): a name that resolves (or rebinds) to a
//     refused address never gets a SYN. Names admitted by pattern never
//     reach loopback, link-local (cloud metadata), multicast or
//     unspecified addresses; configured names may reach loopback; special
//     ranges open only to a CIDR inside them. IPv4-mapped, NAT64 and
//     IPv4-compatible IPv6 forms are judged as the IPv4 address they carry.
//     The client's transports (h1 and its net/http fallback) dial through
//     that dialer only (client.Options.Dial), and the probe closes their
//     connections when it ends.
//   - Redirects are never followed (the client records a 3xx as its
//     answer), and no proxy from the environment is used.
//   - Per target origin, at most probe.max_concurrent_probes probes run at
//     once and requests are spaced at least 1/probe.max_requests_per_second
//     apart, whatever the number of scrapes. A probe over the concurrency
//     ceiling, or whose requests cannot all be sent before its deadline
//     within the rate ceiling, fails at once without sending, with the
//     reason in probe_failed_due_to.
//   - Credentials come from the configuration only (see clientTarget), and
//     are scrubbed from every log line, debug output and history entry;
//     module header values are hidden in the debug output's module dump.
package prober
