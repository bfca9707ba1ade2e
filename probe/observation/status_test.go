package observation

import (
	"slices"
	"testing"
)

func TestStatusCode(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   string
	}{
		{0, ""}, {200, ""}, {204, ""}, {299, ""},
		{400, "400"}, {401, "401"}, {403, "403"}, {404, "404"}, {408, "408"}, {413, "413"},
		{422, "422"}, {429, "429"}, {500, "500"}, {502, "502"}, {503, "503"}, {504, "504"},
		{302, "other"}, {405, "other"}, {418, "other"}, {499, "other"}, {501, "other"}, {599, "other"}, {100, "other"},
	} {
		got := StatusCode(tc.status)
		if got != tc.want {
			t.Errorf("StatusCode(%d) = %q, want %q", tc.status, got, tc.want)
		}
		if got != "" && !slices.Contains(StatusCodes, got) {
			t.Errorf("StatusCode(%d) = %q, not in StatusCodes", tc.status, got)
		}
	}
}

// TestErrorCode: only an HTTP failure has a code; a 2xx stream that broke,
// or a failure without a response, has none.
func TestErrorCode(t *testing.T) {
	for _, tc := range []struct {
		r    Request
		want string
	}{
		{Request{Outcome: HTTP4xx, HTTPStatus: 429}, "429"},
		{Request{Outcome: HTTP5xx, HTTPStatus: 503}, "503"},
		{Request{Outcome: HTTP4xx, HTTPStatus: 418}, "other"},
		{Request{Outcome: HTTP4xx, HTTPStatus: 301}, "other"}, // a redirect not followed
		{Request{Outcome: StreamError, HTTPStatus: 200}, ""},
		{Request{Outcome: Success, HTTPStatus: 200}, ""},
		{Request{Outcome: Disconnected}, ""},
		{Request{Outcome: Dropped}, ""},
	} {
		if got := tc.r.ErrorCode(); got != tc.want {
			t.Errorf("%s %d: ErrorCode %q, want %q", tc.r.Outcome, tc.r.HTTPStatus, got, tc.want)
		}
	}
}
