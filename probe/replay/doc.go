// Package replay replays recorded traffic as a workload: when requests are
// sent, and what they hold, come from a trace instead of an arrival process
// and synthetic prompts.
//
// Read and ReadFile parse a trace into Records: our own recorded requests
// (FormatJSONL, written by the shadow proxy, see CapturedRequest), the Azure
// LLM inference trace CSV, Mooncake JSONL traces and BurstGPT-style CSV. A
// malformed line is an error naming its file and line (*LineError), or,
// under the Skip policy, is left out and counted.
//
// Every input is bounded, so that a trace costs memory in proportion to its
// size and no number in it sizes an allocation: a line is at most
// ReadOptions.MaxLineBytes, a trace at most ReadOptions.MaxRecords records,
// a token count at most 1<<20 (config.MaxTokens), a Mooncake line has no
// more hash ids than prompt tokens, a CSV header at most 1024 columns,
// relative timestamps are finite and in [0, 100 years], absolute ones in
// [1970, 2200). An error quotes at most about 200 bytes of its input. Every
// reader ignores a UTF-8 byte order mark at the start of a file; a file
// whose lines end in a bare CR is refused (ErrCROnly) rather than read as
// one line.
//
// A Source turns a trace into the workload runner's two inputs: Schedule
// (the instant of each record, after speed, window, loop, sampling and the
// rate ceiling) and Prompts (a recorded body, sent as it was, or a prompt
// synthesised to the record's exact token length). Through the runner's
// Requests hook it forces output lengths and hears each request's
// observation, to measure drift (send instant minus trace instant) and
// progress, which it reports to a Recorder.
//
// Synthesised prompts are exact in the embedded simulator's tokenizer (a
// token is a whitespace-separated word; see WordTokenizer). For Mooncake
// traces every hash id maps to one block of BlockSize words, so requests
// that share leading hash ids share exactly those prefix blocks, token for
// token, and reproduce the trace's prefix-cache hits. On another server the
// lengths are close, not exact: replayed prompts are not calibrated against
// its /tokenize.
package replay
