package replay

import (
	"encoding/json"
	"fmt"
	"math"
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
	if err != nil || math.IsNaN(ms) || ms < 0 || ms > float64(math.MaxInt64)/1e6 {
		return false, fmt.Sprintf(`"timestamp" %s is not a number of milliseconds >= 0`, m.Timestamp.String())
	}
	rec.Offset = time.Duration(math.Round(ms * 1e6))
	if n := *m.InputLength; n < 1 || n > maxTokens {
		return false, fmt.Sprintf(`"input_length" %d must be in [1, %d]`, n, maxTokens)
	}
	if n := *m.OutputLength; n < 0 || n > maxTokens {
		return false, fmt.Sprintf(`"output_length" %d must be in [0, %d]`, n, maxTokens)
	}
	rec.InputTokens, rec.OutputTokens = *m.InputLength, *m.OutputLength
	rec.HashIDs = m.HashIDs
	return true, ""
}
