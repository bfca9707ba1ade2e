package main

import (
	"strings"

	"github.com/infer-exporter/infer_exporter/internal/config"
)

// demoConfig is the workload --demo runs against the embedded simulator: a
// chat turn of 256 prompt tokens and 64 output tokens, arriving as a Poisson
// process at 4 requests per second, one of them every 5 s a known-answer
// check. It is parsed like any configuration file,
// so it doubles as an example of the format.
const demoConfig = `# One-shot probes: GET /probe?module=demo&target=<the simulator's URL>.
modules:
  demo:
    target: demo
    requests: 4
    concurrency: 2
    prompt:
      input_tokens: {dist: fixed, mean: 128}
      output_tokens: {dist: fixed, mean: 32}
    sampling:
      ignore_eos: true
    slo:
      ttft: 500ms
    timeout: 30s
    # The simulator's answers are lorem-ipsum words (see the workload's checks).
    known_answers:
      - prompt: "Say a word."
        expect: "[a-z]+"
        max_tokens: 8
  # GET /probe?module=demo-perplexity&target=<the simulator's URL>: the
  # perplexity of the reference text, failing above max_perplexity.
  demo-perplexity:
    target: demo
    kind: perplexity
    max_perplexity: 100
targets:
  - name: demo
    url: SIMULATOR_URL
    flavor: openai-chat
    model: sim-model
    timeout: 1m
    # The quality probe: the perplexity of the reference text, scored every
    # 30 s (infer_probe_perplexity).
    quality:
      interval: 30s
workloads:
  - name: demo-chat
    target: demo
    arrival:
      process: poisson
      rate: 4
      max_rate: 20
    max_in_flight: 64
    prompt:
      input_tokens: {dist: fixed, mean: 256}
      output_tokens: {dist: fixed, mean: 64}
      seed: 1
    sampling:
      ignore_eos: true
    slo:
      ttft: 500ms
      tpot: 50ms
    # Known-answer checks for the accuracy of the ranking. The simulator
    # answers with lorem-ipsum words; against a real model this would be, for
    # example, prompt "What is the capital of France?" and expect "(?i)paris".
    checks:
      - prompt: "Say a word."
        expect: "[a-z]+"
        max_tokens: 8
        interval: 5s
`

// DemoConfig returns the demo configuration aimed at the simulator's URL.
func DemoConfig(simulatorURL string) (*config.Config, error) {
	return config.Parse([]byte(strings.Replace(demoConfig, "SIMULATOR_URL", simulatorURL, 1)), "<demo>")
}
