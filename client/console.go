package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	lk "github.com/leasekeeper/leasekeeper"
)

const (
	pathStore = "/v1/store"
	pathGraph = "/v1/graph"
)

// Store returns one page of req.Lock's keys in the fenced store, in key
// order: at most req.Limit (0 means the server's default, 100) after
// req.After, each with the token of the write that stored its value, and
// the lock's fence. The page's Next is the After of the next page, nil on
// the last. With an auth file, a reader's or an admin's token.
func (c *Client) Store(ctx context.Context, req lk.StoreRequest) (lk.StoreResult, error) {
	q := url.Values{"lock": {req.Lock}}
	if req.Limit != 0 {
		q.Set("limit", strconv.Itoa(req.Limit))
	}
	if req.After != "" {
		q.Set("after", req.After)
	}
	var res lk.StoreResult
	err := c.do(ctx, http.MethodGet, pathStore, q, nil, &res)
	return res, err
}

// Graph returns the connected component of the wait-for graph around
// req.Lock or req.Client (exactly one of them), at most lk.MaxGraphNodes
// locks and clients; Cut says when there were more. With an auth file, a
// reader's or an admin's token.
func (c *Client) Graph(ctx context.Context, req lk.GraphRequest) (lk.GraphResult, error) {
	q := url.Values{}
	if req.Lock != "" {
		q.Set("lock", req.Lock)
	}
	if req.Client != "" {
		q.Set("client", req.Client)
	}
	var res lk.GraphResult
	err := c.do(ctx, http.MethodGet, pathGraph, q, nil, &res)
	return res, err
}
