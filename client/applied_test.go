package client

import (
	"net/http"
	"testing"
)

// TestErrorApplied (issue 20): a 5xx answer's "applied": false is the
// server's word that nothing happened; without it the outcome is unknown,
// and the field means nothing on other errors.
func TestErrorApplied(t *testing.T) {
	for _, tc := range []struct {
		status     int
		body       string
		notApplied bool
		unknown    bool
	}{
		{503, `{"error":"unavailable","message":"m","applied":false}`, true, false},
		{503, `{"error":"shutting_down","message":"m","applied":false}`, true, false},
		{503, `{"error":"unavailable","message":"m"}`, false, true},
		{500, `{"error":"internal","message":"m"}`, false, true},
		{409, `{"error":"not_holder","message":"m","applied":false}`, false, false},
	} {
		e := errorOf(&http.Response{StatusCode: tc.status, Header: http.Header{}}, []byte(tc.body))
		if e.NotApplied != tc.notApplied || e.OutcomeUnknown() != tc.unknown {
			t.Errorf("%d %s: NotApplied %v, OutcomeUnknown %v; want %v, %v", tc.status, tc.body, e.NotApplied, e.OutcomeUnknown(), tc.notApplied, tc.unknown)
		}
	}
}
