package apitest

import (
	"net/http/httptest"
	"testing"

	lk "github.com/leasekeeper/leasekeeper"
)

// BenchmarkCheck measures what Check costs per answer.
func BenchmarkCheck(b *testing.B) {
	v := New(b)
	cases := []struct {
		name, method, target string
		body                 []byte
	}{
		{"granted", "POST", "/v1/acquire", marshal(b, lk.AcquireResult{Outcome: lk.Granted, Token: 7, GrantedAt: 1767225600, ExpiresAt: 1767225630})},
		{"inspect10", "GET", "/v1/inspect?lock=L", marshal(b, lk.InspectResult{Lock: "L", Holders: holders(10), Queue: []lk.Waiter{}})},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest(c.method, c.target, nil)
			b.ReportAllocs()
			for b.Loop() {
				if err := v.Check(req, 200, jsonHeader, c.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
