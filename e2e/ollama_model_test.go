package e2e

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
)

// The tiny model the Ollama end-to-end test serves: a Llama of random
// weights written as GGUF at test time (nothing is downloaded), small enough
// that llama.cpp runs it on the CPU in well under a millisecond a token.
//
// Its vocabulary is a SentencePiece ("llama") one: <unk>, <s>, </s>, the 256
// byte tokens SentencePiece falls back to, "▁" and the 26 letters, and
// tinyWords words of two or three syllables ("▁bako"). The weights are drawn from a PCG seeded with
// tinySeed, so the file is the same on every machine.
//
// One thing is not random: the model can produce only word tokens, never
// </s>, <unk>, <s>, a byte, "▁" or a letter. Ollama has no ignore_eos, so a request's
// output length would otherwise depend on when random weights happen to
// pick </s>; and a byte token can be half a UTF-8 character, which Ollama
// holds back rather than stream, so that a token would not be one chunk.
// Dimension 0 of the residual stream is a constant: every token's embedding
// has 1 there, and no layer writes to it (the first row of every
// attn_output and ffn_down is zero), so after the final RMS norm it is
// always positive. Every word's output row is 0 in that column and the
// other tokens' rows are -1000 there (0 elsewhere): their logits are below
// -100 whatever the prompt, and greedy or sampled decoding never picks them.
//
// Nor does it say one word twice in a row: Ollama ends a stream without
// its final line when a token repeats more than 30 times in a row (its
// guard against a looping model, llm/server.go), which greedy decoding of
// random weights soon does. So the output layer is not random but tied to
// the embeddings, shifted by one: word t's output row is the embedding of
// word t-1, and the layers add little (their output projections are drawn
// with a standard deviation of 0.01), so the logit of the word after the
// current one is the embedding's squared norm (about 63) against random
// dot products (a standard deviation of about 8) for the others. The
// answer walks the words in order, around the 600 of them, from wherever
// the prompt left it.
const (
	tinySeed   = 29
	tinyWords  = 600
	tinyEmbd   = 64
	tinyFF     = 128
	tinyLayers = 2
	tinyHeads  = 4
	tinyCtx    = 4096
)

// GGUF value types and the F32 tensor type (ggml.h, gguf.h).
const (
	ggufUint32  = 4
	ggufInt32   = 5
	ggufFloat32 = 6
	ggufBool    = 7
	ggufString  = 8
	ggufArray   = 9
	ggmlF32     = 0
	ggufAlign   = 32
)

// SentencePiece token types, as llama.cpp reads tokenizer.ggml.token_type.
const (
	tokNormal  = 1
	tokUnknown = 2
	tokControl = 3
	tokByte    = 6
)

type ggufKV struct {
	key string
	val any // uint32, int32, float32, bool, string, []string, []float32, []int32
}

type ggufTensor struct {
	name string
	dims []uint64 // ggml's ne: the fastest-varying dimension first
	data []float32
}

// tinyVocab returns the tokens, their SentencePiece scores and types, and
// how many of them come before the first word (the tokens never produced).
func tinyVocab() (tokens []string, scores []float32, types []int32, firstWord int) {
	add := func(tok string, score float32, typ int32) {
		tokens, scores, types = append(tokens, tok), append(scores, score), append(types, typ)
	}
	add("<unk>", 0, tokUnknown)
	add("<s>", 0, tokControl)
	add("</s>", 0, tokControl)
	for b := 0; b < 256; b++ {
		add(fmt.Sprintf("<0x%02X>", b), 0, tokByte)
	}
	// The word boundary and the letters alone, so that a prompt of other
	// words is read in pieces rather than bytes; never produced either.
	add("▁", -20, tokNormal)
	for c := 'a'; c <= 'z'; c++ {
		add(string(c), -15, tokNormal)
	}
	firstWord = len(tokens)
	consonants, vowels := "bdfgklmnprstvz", "aeiou"
	var syllables []string
	for _, c := range consonants {
		for _, v := range vowels {
			syllables = append(syllables, string(c)+string(v))
		}
	}
	seen := map[string]bool{}
	r := rand.New(rand.NewPCG(tinySeed, 1))
	for len(tokens) < firstWord+tinyWords {
		w := ""
		for n := 2 + r.IntN(2); n > 0; n-- {
			w += syllables[r.IntN(len(syllables))]
		}
		if seen[w] {
			continue
		}
		seen[w] = true
		// Longer pieces score higher, so SentencePiece prefers whole words.
		add("▁"+w, float32(len(w))-10, tokNormal)
	}
	return tokens, scores, types, firstWord
}

// tinyWordSet is the words the model can answer with, without the "▁".
func tinyWordSet() map[string]bool {
	tokens, _, _, first := tinyVocab()
	set := make(map[string]bool, len(tokens)-first)
	for _, t := range tokens[first:] {
		set[t[len("▁"):]] = true
	}
	return set
}

// writeTinyModel writes the model's GGUF to path.
func writeTinyModel(path string) error {
	tokens, scores, types, firstWord := tinyVocab()
	vocab := len(tokens)
	r := rand.New(rand.NewPCG(tinySeed, 2))
	normal := func(n int, std float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * std)
		}
		return v
	}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	// zeroFirstRow: the weight's output row 0 (its first `in` values), so
	// that the layer never writes to the residual's constant dimension.
	zeroFirstRow := func(w []float32, in int) []float32 {
		clear(w[:in])
		return w
	}
	embd := normal(tinyEmbd*vocab, 1)
	for t := 0; t < vocab; t++ {
		embd[t*tinyEmbd] = 1
	}
	out := make([]float32, tinyEmbd*vocab)
	for t := 0; t < vocab; t++ {
		row := out[t*tinyEmbd : (t+1)*tinyEmbd]
		if t < firstWord {
			row[0] = -1000
			continue
		}
		// Word t's row is the embedding of the word before it (the last
		// word's for the first), less the constant dimension.
		pred := t - 1
		if t == firstWord {
			pred = vocab - 1
		}
		copy(row[1:], embd[pred*tinyEmbd+1:(pred+1)*tinyEmbd])
	}
	std := 1 / math.Sqrt(tinyEmbd)
	// The layers write little into the residual stream, so that what
	// reaches the output layer is mostly the current token's embedding.
	const small = 0.01
	tensors := []ggufTensor{
		{"token_embd.weight", []uint64{tinyEmbd, uint64(vocab)}, embd},
		{"output_norm.weight", []uint64{tinyEmbd}, ones(tinyEmbd)},
		{"output.weight", []uint64{tinyEmbd, uint64(vocab)}, out},
	}
	for l := 0; l < tinyLayers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		tensors = append(tensors,
			ggufTensor{p + "attn_norm.weight", []uint64{tinyEmbd}, ones(tinyEmbd)},
			ggufTensor{p + "attn_q.weight", []uint64{tinyEmbd, tinyEmbd}, normal(tinyEmbd*tinyEmbd, std)},
			ggufTensor{p + "attn_k.weight", []uint64{tinyEmbd, tinyEmbd}, normal(tinyEmbd*tinyEmbd, std)},
			ggufTensor{p + "attn_v.weight", []uint64{tinyEmbd, tinyEmbd}, normal(tinyEmbd*tinyEmbd, std)},
			ggufTensor{p + "attn_output.weight", []uint64{tinyEmbd, tinyEmbd}, zeroFirstRow(normal(tinyEmbd*tinyEmbd, small), tinyEmbd)},
			ggufTensor{p + "ffn_norm.weight", []uint64{tinyEmbd}, ones(tinyEmbd)},
			ggufTensor{p + "ffn_gate.weight", []uint64{tinyEmbd, tinyFF}, normal(tinyEmbd*tinyFF, std)},
			ggufTensor{p + "ffn_up.weight", []uint64{tinyEmbd, tinyFF}, normal(tinyEmbd*tinyFF, std)},
			ggufTensor{p + "ffn_down.weight", []uint64{tinyFF, tinyEmbd}, zeroFirstRow(normal(tinyFF*tinyEmbd, small), tinyFF)},
		)
	}
	kvs := []ggufKV{
		{"general.architecture", "llama"},
		{"general.name", "infer-exporter-e2e-tiny"},
		{"general.file_type", uint32(0)}, // all F32
		{"general.alignment", uint32(ggufAlign)},
		{"llama.context_length", uint32(tinyCtx)},
		{"llama.embedding_length", uint32(tinyEmbd)},
		{"llama.block_count", uint32(tinyLayers)},
		{"llama.feed_forward_length", uint32(tinyFF)},
		{"llama.attention.head_count", uint32(tinyHeads)},
		{"llama.attention.head_count_kv", uint32(tinyHeads)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"llama.rope.dimension_count", uint32(tinyEmbd / tinyHeads)},
		{"llama.rope.freq_base", float32(10000)},
		{"llama.vocab_size", uint32(vocab)},
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.scores", scores},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.unknown_token_id", uint32(0)},
		{"tokenizer.ggml.bos_token_id", uint32(1)},
		{"tokenizer.ggml.eos_token_id", uint32(2)},
		{"tokenizer.ggml.add_bos_token", true},
		{"tokenizer.ggml.add_eos_token", false},
	}
	return writeGGUF(path, kvs, tensors)
}

// writeGGUF writes a GGUF version 3 file: header, key-values, tensor
// infos, then each tensor's F32 data at an offset aligned to ggufAlign.
func writeGGUF(path string, kvs []ggufKV, tensors []ggufTensor) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	var werr error
	put := func(v any) {
		if werr == nil {
			werr = binary.Write(w, binary.LittleEndian, v)
		}
	}
	str := func(s string) {
		put(uint64(len(s)))
		if werr == nil {
			_, werr = w.WriteString(s)
		}
	}
	w.WriteString("GGUF")
	put(uint32(3))
	put(uint64(len(tensors)))
	put(uint64(len(kvs)))
	for _, kv := range kvs {
		str(kv.key)
		switch v := kv.val.(type) {
		case uint32:
			put(uint32(ggufUint32))
			put(v)
		case float32:
			put(uint32(ggufFloat32))
			put(v)
		case bool:
			put(uint32(ggufBool))
			put(v)
		case string:
			put(uint32(ggufString))
			str(v)
		case []string:
			put(uint32(ggufArray))
			put(uint32(ggufString))
			put(uint64(len(v)))
			for _, s := range v {
				str(s)
			}
		case []float32:
			put(uint32(ggufArray))
			put(uint32(ggufFloat32))
			put(uint64(len(v)))
			put(v)
		case []int32:
			put(uint32(ggufArray))
			put(uint32(ggufInt32))
			put(uint64(len(v)))
			put(v)
		default:
			return fmt.Errorf("gguf: key %s: unsupported type %T", kv.key, v)
		}
	}
	pad := func(n uint64) uint64 { return (n + ggufAlign - 1) / ggufAlign * ggufAlign }
	var offset uint64
	for _, t := range tensors {
		str(t.name)
		put(uint32(len(t.dims)))
		for _, d := range t.dims {
			put(d)
		}
		put(uint32(ggmlF32))
		put(offset)
		offset = pad(offset + uint64(4*len(t.data)))
	}
	if werr != nil {
		f.Close()
		return werr
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	// The data section starts at the next aligned offset of the file.
	pos, err := f.Seek(0, 1)
	if err != nil {
		f.Close()
		return err
	}
	w.Reset(f)
	w.Write(make([]byte, pad(uint64(pos))-uint64(pos)))
	var written uint64
	for _, t := range tensors {
		w.Write(make([]byte, pad(written)-written))
		written = pad(written)
		put(t.data)
		written += uint64(4 * len(t.data))
	}
	if werr != nil {
		f.Close()
		return werr
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
