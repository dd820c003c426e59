package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	lk "github.com/leasekeeper/leasekeeper"
)

const pathHistory = "/v1/history"

// History returns one page of the grant history of req.Lock or of
// req.Client (exactly one of them), newest first: at most req.Limit grants
// (0 means the server's default, 100) from req.Before (the previous page's
// Next; "" for the newest). The page's Next is nil on the last page.
// AllHistory follows the pages.
func (c *Client) History(ctx context.Context, req lk.HistoryRequest) (lk.HistoryResult, error) {
	q := url.Values{}
	if req.Lock != "" {
		q.Set("lock", req.Lock)
	}
	if req.Client != "" {
		q.Set("client", req.Client)
	}
	if req.Limit != 0 {
		q.Set("limit", strconv.Itoa(req.Limit))
	}
	if req.Before != "" {
		q.Set("before", req.Before)
	}
	var res lk.HistoryResult
	err := c.do(ctx, http.MethodGet, pathHistory, q, nil, &res)
	return res, err
}

// AllHistory yields every grant of req's history from req.Before on,
// newest first, reading pages of req.Limit as it goes. It stops at the
// first error, which it yields.
func (c *Client) AllHistory(ctx context.Context, req lk.HistoryRequest) iter.Seq2[lk.GrantRecord, error] {
	return func(yield func(lk.GrantRecord, error) bool) {
		for {
			page, err := c.History(ctx, req)
			if err != nil {
				yield(lk.GrantRecord{}, err)
				return
			}
			for _, g := range page.Grants {
				if !yield(g, nil) {
					return
				}
			}
			if page.Next == nil {
				return
			}
			req.Before = *page.Next
		}
	}
}
