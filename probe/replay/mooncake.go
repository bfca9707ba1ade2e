package replay

import (
	"encoding/json"
	"fmt"
	"time"
)

// mooncakeLine is one line of a Mooncake trace.
type mooncakeLine struct {
	Timestamp    *json.Number `json:"timestamp"`
	InputLength  *int         `json:"input_length"`
	OutputLength *int         `json:"output_length"`
	HashIDs      []int64      `json:"hash_ids"`
}

// mooncakeParser reads FormatMooncake lines. Whether hash_ids cover
// input_length depends on the block size, which the Source knows; it checks.
type mooncakeParser struct{}

func (mooncakeParser) parse(line []byte, _ int, rec *Record) (bool, string) {
	var m mooncakeLine
	if err := decodeStrict(line, &m); err != nil {
		return false, jsonErrorReason(err)
	}
	switch {
	case m.Timestamp == nil:
		return false, `needs "timestamp" (ms)`
	case m.InputLength == nil:
		return false, `needs "input_length"`
	case m.OutputLength == nil:
		return false, `needs "output_length"`
	case len(m.HashIDs) == 0:
		return false, `needs "hash_ids" (at least one block)`
	}
	ms, err := m.Timestamp.Float64()
	off, ok := offsetOf(ms, time.Millisecond)
	if err != nil || !ok {
		return false, fmt.Sprintf(`"timestamp" %s is not a number of milliseconds in [0, %d]`, clip(m.Timestamp.String(), maxQuoted), maxOffset.Milliseconds())
	}
	rec.Offset = off
	if n := *m.InputLength; n < 1 || n > maxTokens {
		return false, fmt.Sprintf(`"input_length" %d must be in [1, %d]`, n, maxTokens)
	}
	if n := *m.OutputLength; n < 0 || n > maxTokens {
		return false, fmt.Sprintf(`"output_length" %d must be in [0, %d]`, n, maxTokens)
	}
	if len(m.HashIDs) > *m.InputLength {
		// Whatever the block size (at least one token), a prompt has no
		// more blocks than tokens.
		return false, fmt.Sprintf(`%d "hash_ids" for an "input_length" of %d: more blocks than tokens`, len(m.HashIDs), *m.InputLength)
	}
	rec.InputTokens, rec.OutputTokens = *m.InputLength, *m.OutputLength
	rec.HashIDs = m.HashIDs
	return true, ""
}
