package traffic

import (
	"context"
	"errors"
	"net/http"
	"syscall"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/e2e/cluster"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
)

// Client is a recording client: it sends each operation through the
// project's Go client (package client) to the server Target picks, and
// records it in the History. It is safe for concurrent use, though a
// worker is meant to send one operation at a time.
type Client struct {
	h      *history.History
	worker int
	target cluster.Target
	hc     *http.Client
	// Timeout bounds each operation beyond its wait; past it the outcome
	// is unknown.
	Timeout time.Duration
}

// NewClient returns a recording client for worker, recording into h.
func NewClient(h *history.History, worker int, target cluster.Target, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{h: h, worker: worker, target: target, hc: hc, Timeout: 10 * time.Second}
}

// HTTPClient returns an HTTP client for recording clients: its own
// connection pool, large enough for many workers on one server, and no
// timeout of its own (each operation has its context's).
func HTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: t}
}

// do runs one operation: send sends it with the Go client and fills out.
func (c *Client) do(ctx context.Context, in history.Input, send func(ctx context.Context, cl *client.Client) (history.Output, error)) history.Op {
	ep := c.target()
	cl := client.New(ep.URL, client.WithHTTPClient(c.hc), client.WithRateLimitWait(0))
	ctx, cancel := context.WithTimeout(ctx, c.Timeout+time.Duration(in.Wait)*time.Second)
	defer cancel()
	op := history.Op{Worker: c.worker, Server: ep.Server, Incarnation: ep.Incarnation, Input: in, Call: c.h.Now()}
	out, err := send(ctx, cl)
	op.Return = c.h.Now()
	var e *client.Error
	switch {
	case err == nil:
	case errors.As(err, &e) && e.Status != 0 && e.Status < 500:
		out = history.Output{Err: e.Code, Detail: e.Message}
		if e.Code == "" {
			// Not the API's answer (a proxy's?): nothing known.
			out = history.Output{Unknown: true, Detail: err.Error()}
		}
	case errors.Is(err, syscall.ECONNREFUSED):
		out = history.Output{NotSent: true, Detail: err.Error()}
	case errors.As(err, &e) && e.NotApplied:
		// The server's word that nothing happened, trusted as a client
		// would: the checks catch a server that says it wrongly.
		out = history.Output{NotApplied: true, Detail: err.Error(), Status: e.Status, Code: e.Code, RetryAfter: int64(e.RetryAfter / time.Second)}
	default:
		out = history.Output{Unknown: true, Detail: err.Error()}
		if e != nil {
			out.Status = e.Status
			out.Code, out.RetryAfter = e.Code, int64(e.RetryAfter/time.Second)
		}
	}
	op.Output = out
	return c.h.Record(op)
}

// Acquire sends an acquire of lock by client, with ttl and wait in seconds.
func (c *Client) Acquire(ctx context.Context, clientID, lock string, ttl int64, mode lk.Mode, wait int64) history.Op {
	in := history.Input{Kind: history.Acquire, Client: clientID, Lock: lock, TTL: ttl, Mode: mode, Wait: wait}
	return c.do(ctx, in, func(ctx context.Context, cl *client.Client) (history.Output, error) {
		res, err := cl.AcquireOnce(ctx, lock, client.AcquireOptions{Client: clientID, TTL: time.Duration(ttl) * time.Second,
			Shared: mode == lk.Shared, Wait: time.Duration(wait) * time.Second})
		return history.Output{Outcome: res.Outcome, Token: res.Token, GrantedAt: res.GrantedAt, ExpiresAt: res.ExpiresAt, Position: res.Position}, err
	})
}

// Renew sends a renew of client's lease on lock for ttl seconds.
func (c *Client) Renew(ctx context.Context, clientID, lock string, ttl int64) history.Op {
	in := history.Input{Kind: history.Renew, Client: clientID, Lock: lock, TTL: ttl}
	return c.do(ctx, in, func(ctx context.Context, cl *client.Client) (history.Output, error) {
		res, err := cl.Renew(ctx, clientID, lock, time.Duration(ttl)*time.Second)
		return history.Output{Outcome: res.Outcome, Token: res.Token, GrantedAt: res.GrantedAt, ExpiresAt: res.ExpiresAt}, err
	})
}

// Release sends a release of lock by client.
func (c *Client) Release(ctx context.Context, clientID, lock string) history.Op {
	in := history.Input{Kind: history.Release, Client: clientID, Lock: lock}
	return c.do(ctx, in, func(ctx context.Context, cl *client.Client) (history.Output, error) {
		res, err := cl.Release(ctx, clientID, lock)
		return history.Output{Outcome: res.Outcome}, err
	})
}

// Write sends a write to the fenced store, on behalf of client.
func (c *Client) Write(ctx context.Context, clientID, lock, key, value string, token int64) history.Op {
	in := history.Input{Kind: history.Write, Client: clientID, Lock: lock, Key: key, Value: value, Token: token}
	return c.do(ctx, in, func(ctx context.Context, cl *client.Client) (history.Output, error) {
		res, err := cl.Write(ctx, lock, key, value, token)
		return history.Output{Outcome: res.Outcome}, err
	})
}

// Read sends a read of the fenced store, on behalf of client; final marks
// a read after the workload (Input.Final).
func (c *Client) Read(ctx context.Context, clientID, lock, key string, final bool) history.Op {
	in := history.Input{Kind: history.Read, Client: clientID, Lock: lock, Key: key, Final: final}
	return c.do(ctx, in, func(ctx context.Context, cl *client.Client) (history.Output, error) {
		res, err := cl.Read(ctx, lock, key)
		return history.Output{Value: res.Value, Token: res.Token}, err
	})
}
