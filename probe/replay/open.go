package replay

import (
	"github.com/infer-exporter/infer_exporter/internal/config"
)

// Open reads replay r's trace and prepares it for target t, as a replay
// workload does when it starts: the readers' refusals (a malformed line
// under on_malformed: refuse) and the source's (a recorded body of another
// API than the target's, a record that cannot be replayed exactly) are its
// error. rec hears the replay once it runs; nil hears nothing. Nothing is
// sent: --config.check and the bench call it to refuse a trace before any
// request, rather than when its workload or cell starts.
func Open(r *config.Replay, t *config.Target, rec Recorder) (*Source, *Trace, Format, error) {
	format, opts, err := OptionsOf(r, t)
	if err != nil {
		return nil, nil, "", err
	}
	tr, err := ReadFile(r.Path, format, ReadOptions{OnMalformed: opts.OnUnreplayable})
	if err != nil {
		return nil, nil, "", err
	}
	opts.Recorder = rec
	src, err := NewSource(tr, opts)
	if err != nil {
		return nil, nil, "", err
	}
	return src, tr, format, nil
}
