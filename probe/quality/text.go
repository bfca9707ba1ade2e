package quality

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Text is a text to score: its name, its bytes and their SHA-256. Two
// perplexities are comparable only over the same bytes, so every figure
// carries the hash (the text label holds its first LabelHexDigits hex
// digits).
type Text struct {
	Name   string
	Body   string
	SHA256 string // hex
}

// MaxTextBytes bounds a text to score: a few hundred tokens say enough,
// and the answer carries several entries per token.
const MaxTextBytes = 64 << 10

// LabelHexDigits is how much of the hash the text label shows: 64 bits,
// enough to tell texts apart, short enough for a label.
const LabelHexDigits = 16

// NewText names body and hashes it. It refuses a text that cannot give a
// perplexity (fewer than two words, at least two tokens in any tokenizer)
// or that is longer than MaxTextBytes.
func NewText(name, body string) (Text, error) {
	switch {
	case len(body) > MaxTextBytes:
		return Text{}, fmt.Errorf("text %q is %d bytes, more than %d", name, len(body), MaxTextBytes)
	case len(strings.Fields(body)) < 2:
		return Text{}, fmt.Errorf("text %q has fewer than two words: no token after the first to score", name)
	}
	sum := sha256.Sum256([]byte(body))
	return Text{Name: name, Body: body, SHA256: hex.EncodeToString(sum[:])}, nil
}

// Label is the value of the text label: the first LabelHexDigits hex
// digits of the SHA-256.
func (t Text) Label() string { return t.SHA256[:min(LabelHexDigits, len(t.SHA256))] }

// ReferenceName names the built-in text. A change of its bytes changes its
// hash, and therefore its label, so that no figure of the old text is read
// as one of the new.
const ReferenceName = "reference-v1"

// referenceBody is the built-in reference text: plain English prose,
// written for this project and dedicated to the public domain, so that
// anyone can score the same bytes. It is ordinary narrative with numbers,
// names and a little dialogue, the kind of text on which a healthy model's
// perplexity is low and steady, and on which a damaged one (a bad
// quantisation, the wrong weights, a broken tokenizer or chat template)
// rises visibly. Its 367 words are some 400 to 500 tokens in common
// tokenizers: one short prefill.
const referenceBody = `The ferry left the north pier at seven every morning, and on most days it carried more bicycles than cars. ` +
	`Maria had worked the ticket window for eleven years. She knew the regulars by their coats: the teacher in the green raincoat, ` +
	`the two brothers who repaired boat engines, the old man who crossed the river only to buy bread on the other side because, he said, ` +
	`the bakery there still used the recipe his mother had liked. ` +
	`In winter the crossing took twenty minutes; in summer, when the current was slow, it took barely fifteen. ` +
	`The captain kept a notebook in which he wrote the time of every departure, the height of the water and the direction of the wind. ` +
	`Nobody had asked him to do it. When the town council wanted to change the timetable, they found that his notes were the only ` +
	`record anyone had, and they read all of them, page after page, before deciding to leave the schedule as it was. ` +
	`One foggy morning in March the ferry did not leave at seven. The radio had warned of a barge drifting without power somewhere ` +
	`upstream, and the captain would not cast off until he could see the far bank. Passengers waited in the small hall beside the pier. ` +
	`Someone made coffee. The teacher marked homework on her knee, and the brothers argued quietly about a gearbox. ` +
	`"It will clear by half past," the captain said, looking at the grey water. "It always does when the tide turns." ` +
	`At twenty-eight minutes past seven the fog lifted from the river as if a curtain had been drawn, and the opposite shore appeared, ` +
	`with its church, its row of blue houses and the bakery lamp still burning. The barge was tied up safely at the old quay. ` +
	`The ferry left at seven thirty-one, and the captain wrote that down too, with a short note: late, fog, no harm done. ` +
	`Years later, when the bridge was built and the ferry was sold, the notebooks went to the town library, where children sometimes ` +
	`ask to see them. They are surprised that a whole life can fit on so many small pages, written in the same careful hand.`

// Reference returns the built-in reference text.
func Reference() Text {
	t, err := NewText(ReferenceName, referenceBody)
	if err != nil {
		panic(err) // a constant text: a test would have caught it
	}
	return t
}
