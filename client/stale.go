package client

import (
	"context"
	"net/http"

	lk "github.com/leasekeeper/leasekeeper"
)

const pathStale = "/v1/stale"

// ReportStale tells the server that a fence in the job's own database
// (package fence) refused r.Client's token on r.Lock as stale, for its
// metric (leasekeeper_fence_stale_total) and its console. It is optional,
// and never on the write's path: send it after the refused transaction
// rolled back, and go on if it fails. With an auth file, only the holder's
// own principal may report, and only about a token granted to r.Client on
// r.Lock. Errors: an *Error with Code lk.CodeTokenNotGranted when the token was
// not granted to that client on that lock, ErrForbidden,
// ErrInvalidArguments; ErrNotFound from a server that does not take
// reports.
func (c *Client) ReportStale(ctx context.Context, r lk.StaleRequest) error {
	var res lk.StaleResult
	return c.do(ctx, http.MethodPost, pathStale, nil, r, &res)
}
