package client

// bodyEncoder is a Flavor that can encode a request's body before its send.
type bodyEncoder interface {
	body(t *Target, r *Request) (*body, error)
}

// Prepare encodes r's body for t ahead of its send, so that Do only wraps
// it: the runner prepares requests before their scheduled instants, and a
// long prompt's encoding (a 12k-token prompt is some 70 kB of JSON) is then
// never schedule lag. A flavor that cannot encode ahead, or a body that
// fails to encode, is left to Do, which reports the error as it always has.
func Prepare(t *Target, r *Request) {
	flavor := t.Flavor
	if flavor == nil {
		flavor = OpenAIChat
	}
	if be, ok := flavor.(bodyEncoder); ok {
		if b, err := be.body(t, r); err == nil {
			r.prepared = b
		}
	}
}

// preparedBody is r's body as Prepare encoded it, or, when it did not,
// encoded now.
func preparedBody(be bodyEncoder, t *Target, r *Request) (*body, error) {
	if r.prepared != nil {
		return r.prepared, nil
	}
	return be.body(t, r)
}

// Bytes is about how much memory r holds: its prompt, recorded body and
// prepared body, less the images the body shares with the other requests
// of its workload, which r does not hold alone.
func (r *Request) Bytes() int {
	n := len(r.Prompt) + len(r.RawBody)
	if r.prepared != nil {
		n += r.prepared.own
	}
	return n
}
