package simulator

import (
	"strings"

	"github.com/infer-exporter/infer_exporter/internal/hashmix"
)

// The simulator's tokenizer. It is deliberately trivial and fully specified,
// because the exporter builds synthetic prompts of an exact token count
// against it and the Mooncake replay relies on which blocks of tokens are
// equal. Changing anything in this file changes every token count the
// simulator reports.
//
//   - A text's tokens are its whitespace-separated words, exactly as
//     strings.Fields splits them (Unicode white space). "" and "   " have no
//     tokens; "a  b\nc" has three.
//   - A token's id is the 32-bit FNV-1a hash of the word's bytes (as
//     hash/fnv's New32a computes it), modulo VocabSize.
//   - A chat request is rendered through a fixed template before it is
//     tokenized. Each message contributes ChatTokensPerMessage template
//     tokens around the words of its content, in this order:
//
//     <|im_start|>  <|ROLE|>  word1 ... wordN  <|im_end|>
//
//     where ROLE is the message's role verbatim (so the second token is the
//     id of the string "<|" + role + "|>"). When a generation prompt is
//     added (always for /v1/chat/completions; by default for /tokenize with
//     messages, like vLLM's add_generation_prompt) one more token follows:
//     <|assistant|>. So [{user, "a b c"}] is 3+3+1 = 7 tokens.
//     A message's content is its string, or the text parts of a content array
//     joined by a space; a null content has no words.
//   - An image (an image_url content part of a chat message, an Ollama
//     image) is Config.ImageTokens tokens, as a vision encoder's output
//     stands in the prompt for it. They follow the words of the message
//     that carries the image (of the prompt, for Ollama's /api/generate),
//     in the order of its images, before its <|im_end|>. Their ids are a
//     function of the image's identity (imageKey: a hash of its base64
//     data, or of its URL when it has none), so that equal images are
//     equal tokens for the prefix cache, as vLLM's hashes of image
//     content make them: id k of an image with key h is
//     Mix64(h ^ (k+1)*0x9e3779b97f4a7c15) mod VocabSize.
//   - Generated tokens are words of OutputVocabulary, each emitted with one
//     leading space (" lorem"). The concatenated output text therefore
//     tokenizes back to exactly the number of generated tokens, and each
//     streamed content chunk carries exactly one token.

// VocabSize is the size of the simulated vocabulary; token ids are in
// [0, VocabSize).
const VocabSize = 32000

// Template token counts of the chat template.
const (
	ChatTokensPerMessage       = 3
	ChatGenerationPromptTokens = 1
)

// Template token strings of the chat template (see the tokenizer comment).
const (
	chatMessageStart     = "<|im_start|>"
	chatMessageEnd       = "<|im_end|>"
	chatGenerationPrompt = "<|assistant|>"
)

const (
	fnv32Offset = 2166136261
	fnv32Prime  = 16777619
)

// fnv32a continues a 32-bit FNV-1a hash over s.
func fnv32a(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= fnv32Prime
	}
	return h
}

// TokenID is the id of one word: FNV-1a 32 of its bytes modulo VocabSize.
func TokenID(word string) int {
	return int(fnv32a(fnv32Offset, word) % VocabSize)
}

// roleTokenID is the id of the template token "<|" + role + "|>", computed
// without building the string.
func roleTokenID(role string) int {
	h := fnv32a(fnv32Offset, "<|")
	h = fnv32a(h, role)
	h = fnv32a(h, "|>")
	return int(h % VocabSize)
}

// CountTokens is the number of tokens of a completion prompt.
func CountTokens(text string) int {
	n := 0
	for range strings.FieldsSeq(text) {
		n++
	}
	return n
}

// AppendTokenIDs appends the token ids of text to dst.
func AppendTokenIDs(dst []int, text string) []int {
	for w := range strings.FieldsSeq(text) {
		dst = append(dst, TokenID(w))
	}
	return dst
}

// ChatMessage is one message of a chat prompt, its content already reduced
// to text.
type ChatMessage struct {
	Role    string
	Content string
}

// CountChatTokens is the number of tokens of a chat prompt after the
// template: the content words, ChatTokensPerMessage per message and, when
// addGenerationPrompt is set, ChatGenerationPromptTokens.
func CountChatTokens(messages []ChatMessage, addGenerationPrompt bool) int {
	n := 0
	for _, m := range messages {
		n += ChatTokensPerMessage + CountTokens(m.Content)
	}
	if addGenerationPrompt {
		n += ChatGenerationPromptTokens
	}
	return n
}

// AppendChatTokenIDs appends the token ids of a templated chat prompt to dst.
func AppendChatTokenIDs(dst []int, messages []ChatMessage, addGenerationPrompt bool) []int {
	start, end := TokenID(chatMessageStart), TokenID(chatMessageEnd)
	for _, m := range messages {
		dst = append(dst, start, roleTokenID(m.Role))
		dst = AppendTokenIDs(dst, m.Content)
		dst = append(dst, end)
	}
	if addGenerationPrompt {
		dst = append(dst, TokenID(chatGenerationPrompt))
	}
	return dst
}

// imageKey is an image's identity: FNV-1a 64 of its base64 data (of a data
// URL, what follows ";base64,"), or of the whole URL when it has none.
// The same image sent as an OpenAI data URL and as an Ollama base64
// string has the same key.
func imageKey(url string) uint64 {
	if strings.HasPrefix(url, "data:") {
		if i := strings.Index(url, ";base64,"); i >= 0 {
			url = url[i+len(";base64,"):]
		}
	}
	return fnv64aString(fnv64Offset, url)
}

// fnv64aString continues a 64-bit FNV-1a hash over the bytes of s.
func fnv64aString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnv64Prime
	}
	return h
}

// appendImageTokenIDs appends the n token ids of the image whose key is h.
func appendImageTokenIDs(dst []int, h uint64, n int) []int {
	for k := range n {
		dst = append(dst, int(hashmix.Mix64(h^(uint64(k)+1)*0x9e3779b97f4a7c15)%VocabSize))
	}
	return dst
}

// appendChatImageTokenIDs is AppendChatTokenIDs with images: images[i]
// holds the keys of message i's images (nil: none), each imageTokens
// tokens after the message's words.
func appendChatImageTokenIDs(dst []int, messages []ChatMessage, images [][]uint64, imageTokens int, addGenerationPrompt bool) []int {
	start, end := TokenID(chatMessageStart), TokenID(chatMessageEnd)
	for i, m := range messages {
		dst = append(dst, start, roleTokenID(m.Role))
		dst = AppendTokenIDs(dst, m.Content)
		if i < len(images) {
			for _, h := range images[i] {
				dst = appendImageTokenIDs(dst, h, imageTokens)
			}
		}
		dst = append(dst, end)
	}
	if addGenerationPrompt {
		dst = append(dst, TokenID(chatGenerationPrompt))
	}
	return dst
}

// OutputVocabulary is the closed set of words the simulator generates. Every
// word is plain ASCII without characters that JSON escapes, so chunks can be
// rendered without an encoder.
var OutputVocabulary = [64]string{
	"lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit",
	"sed", "do", "eiusmod", "tempor", "incididunt", "ut", "labore", "et",
	"dolore", "magna", "aliqua", "enim", "ad", "minim", "veniam", "quis",
	"nostrud", "exercitation", "ullamco", "laboris", "nisi", "aliquip", "ex", "ea",
	"commodo", "consequat", "duis", "aute", "irure", "in", "reprehenderit", "voluptate",
	"velit", "esse", "cillum", "fugiat", "nulla", "pariatur", "excepteur", "sint",
	"occaecat", "cupidatat", "non", "proident", "sunt", "culpa", "qui", "officia",
	"deserunt", "mollit", "anim", "id", "est", "laborum", "at", "vero",
}

// outputPieces holds each output word with its leading space, so that
// rendering a chunk does not concatenate strings.
var outputPieces = func() (p [len(OutputVocabulary)]string) {
	for i, w := range OutputVocabulary {
		p[i] = " " + w
	}
	return p
}()

// outputPiece is the text of generated token i (0-based) of a request whose
// content key is key: a leading space and a word of OutputVocabulary.
func outputPiece(key uint64, i int) string {
	return outputPieces[hashmix.Mix64(key^(uint64(i)+1)*0x9e3779b97f4a7c15)%uint64(len(outputPieces))]
}

const (
	fnv64Offset = 14695981039317130211
	fnv64Prime  = 1099511628211
)

// fnv64aUint continues a 64-bit FNV-1a hash over the little-endian bytes of v
// (n bytes).
func fnv64aUint(h uint64, v uint64, n int) uint64 {
	for i := 0; i < n; i++ {
		h ^= v & 0xff
		h *= fnv64Prime
		v >>= 8
	}
	return h
}

// promptKey is a hash of a prompt's token ids, mixed with the seed. It makes
// the generated words and the EOS point reproducible per request content.
func promptKey(seed uint64, ids []int) uint64 {
	h := fnv64aUint(fnv64Offset, seed, 8)
	for _, id := range ids {
		h = fnv64aUint(h, uint64(id), 4)
	}
	return h
}

// blockHashes returns the hash chain of the full blocks of ids: block j's
// hash is FNV-1a 64 over the 8 little-endian bytes of block j-1's hash (0 for
// the first block) followed by the 4 little-endian bytes of each of its
// blockSize token ids. Equal hashes mean equal prefixes, as in vLLM. A hash
// of 0 is replaced by 1, because 0 marks "no hash" in the block pool.
func blockHashes(ids []int, blockSize int) []uint64 {
	return seededBlockHashes(ids, blockSize, 0)
}

// seededBlockHashes is blockHashes whose first block's parent is seed
// instead of 0: a LoRA adapter's key (adapterKey), so that an adapter's
// blocks never equal the base model's or another adapter's, as vLLM keys
// its block hashes by the adapter.
func seededBlockHashes(ids []int, blockSize int, seed uint64) []uint64 {
	n := len(ids) / blockSize
	if n == 0 {
		return nil
	}
	out := make([]uint64, n)
	parent := seed
	for j := range n {
		h := fnv64aUint(fnv64Offset, parent, 8)
		for _, id := range ids[j*blockSize : (j+1)*blockSize] {
			h = fnv64aUint(h, uint64(id), 4)
		}
		if h == 0 {
			h = 1
		}
		out[j] = h
		parent = h
	}
	return out
}

// adapterKey is a LoRA adapter's prefix-cache key: FNV-1a 64 of its name,
// never 0 (the base model's).
func adapterKey(name string) uint64 {
	h := fnv64aString(fnv64Offset, name)
	if h == 0 {
		h = 1
	}
	return h
}
