package server

import (
	"bytes"
	"encoding/json"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
)

// asEncodingJSON fails t unless encode writes for v what encoding/json
// writes, HTML not escaped, with its newline.
func asEncodingJSON(t *testing.T, v any) {
	t.Helper()
	got, err := encode(v)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("%+v:\nencode        %q\nencoding/json %q", v, got, want.Bytes())
	}
}

// TestEncodeAsEncodingJSON: the answers encode writes by hand, and those
// it leaves to encoding/json, are encoding/json's bytes, whatever their
// outcome.
func TestEncodeAsEncodingJSON(t *testing.T) {
	odd := "<a&b>\u2028\"\\\x01\xff"
	wait := 2.5
	for _, v := range []any{
		lk.AcquireResult{Outcome: lk.Granted, Token: 3, GrantedAt: 0, ExpiresAt: 30},
		lk.AcquireResult{Outcome: lk.Granted, Token: 9, GrantedAt: 100, ExpiresAt: 130, Predecessors: []lk.Predecessor{
			{Client: &odd, Token: 8, Mode: lk.Exclusive, Ended: lk.EndLapsed, EndedAt: 100}, {Token: 7, Mode: lk.Shared, Ended: lk.EndReleased, EndedAt: 90}}},
		lk.AcquireResult{Outcome: lk.Granted, Token: 5, GrantedAt: 50, ExpiresAt: 80, Predecessors: []lk.Predecessor{}},
		lk.AcquireResult{Outcome: lk.Granted, Token: 6, Victims: []string{}, Aborts: []lk.Abort{{Age: 1}}},
		lk.AcquireResult{Outcome: lk.Queued, Position: 2, EstimatedWait: &wait, Reason: lk.ReasonServerStopping},
		lk.AcquireResult{Outcome: lk.Granted, Token: 4, ExpiresAt: 40, Victims: []string{odd},
			Aborts: []lk.Abort{{Victim: &odd, Age: 5, Cycle: []lk.CycleMember{{Client: &odd, Age: 5, WaitsFor: "L"}}}}},
		lk.AcquireResult{Outcome: lk.Deadlock, Victims: []string{"a"}},
		lk.ReleaseResult{Outcome: lk.Released},
		lk.ReleaseResult{Outcome: lk.Outcome(odd)},
		lk.RenewResult{Outcome: lk.Renewed, Token: 1, GrantedAt: 2, ExpiresAt: 3},
	} {
		asEncodingJSON(t, v)
	}
}

// FuzzAnswersJSON: a grant with predecessors of any strings and integers,
// and a release of any outcome, are written by hand as encoding/json
// writes them (control bytes, quotes, invalid UTF-8, U+2028, <, > and &).
func FuzzAnswersJSON(f *testing.F) {
	f.Add("c0", "exclusive", "released", "granted", int64(7), int64(1796397050), true)
	f.Add("a\"b\\c\b\f\n\r\t\x00\x1f\x7f", "<shared>", "lapsed&", "released", int64(-1), int64(0), false)
	f.Add("\xff\xfe\u2028\u2029é漢\U0001F600", "\xc3", "x\xe2\x80", "withdrawn", int64(1<<62), int64(-1<<63), true)
	f.Fuzz(func(t *testing.T, client, mode, ended, outcome string, token, at int64, nilClient bool) {
		var c *string
		if !nilClient {
			c = &client
		}
		for n := range 3 {
			r := lk.AcquireResult{Outcome: lk.Granted, Token: token, GrantedAt: at, ExpiresAt: at ^ token,
				Predecessors: []lk.Predecessor{}} // empty, not nil: left out all the same
			for i := range n {
				r.Predecessors = append(r.Predecessors, lk.Predecessor{Client: c, Token: token - int64(i),
					Mode: lk.Mode(mode), Ended: lk.Ending(ended), EndedAt: at + int64(i)})
			}
			asEncodingJSON(t, r)
		}
		asEncodingJSON(t, lk.ReleaseResult{Outcome: lk.Outcome(outcome)})
	})
}
