package observation

import "strconv"

// StatusCodes is the bounded set of HTTP status codes that failures are
// counted by (the code label of infer_probe_http_errors_total and
// probe_http_errors, the bench's summary.http_errors): the codes an
// inference server or its gateway answers with, one by one, and "other"
// for every other non-2xx status. The set is closed, so that it can be a
// label value with bounded cardinality.
var StatusCodes = []string{"400", "401", "403", "404", "408", "413", "422", "429", "500", "502", "503", "504", StatusOther}

// StatusOther is the code of a non-2xx status outside StatusCodes' named ones.
const StatusOther = "other"

// statusNamed are the named codes of StatusCodes.
var statusNamed = func() map[int]string {
	m := map[int]string{}
	for _, c := range StatusCodes {
		if n, err := strconv.Atoi(c); err == nil {
			m[n] = c
		}
	}
	return m
}()

// StatusCode is the code of an HTTP status in StatusCodes: the status
// itself when the set names it, "other" for any other non-2xx status, and
// "" when there is no HTTP failure (0: no response; 2xx).
func StatusCode(status int) string {
	switch {
	case status == 0 || (status >= 200 && status <= 299):
		return ""
	case statusNamed[status] != "":
		return statusNamed[status]
	}
	return StatusOther
}

// ErrorCode is the code of the request's HTTP failure (StatusCode of its
// status) when its outcome is http_4xx or http_5xx; "" for every other
// outcome, whatever its status (a 2xx stream that broke is no HTTP error).
func (r *Request) ErrorCode() string {
	if r.Outcome != HTTP4xx && r.Outcome != HTTP5xx {
		return ""
	}
	return StatusCode(r.HTTPStatus)
}
