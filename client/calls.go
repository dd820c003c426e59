package client

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	lk "github.com/leasekeeper/leasekeeper"
)

const (
	pathAcquire = "/v1/acquire"
	pathRenew   = "/v1/renew"
	pathRelease = "/v1/release"
	pathRevoke  = "/v1/revoke"
	pathWrite   = "/v1/write"
	pathRead    = "/v1/read"
	pathInspect = "/v1/inspect"
	pathStatus  = "/v1/status"
	pathLocks   = "/v1/locks"
	pathHealth  = "/v1/health"
)

// seconds turns d into the API's whole seconds. A d that is not whole
// seconds is refused here, as the server would refuse it, with the field's
// name.
func seconds(field string, d time.Duration) (int64, error) {
	if d%time.Second != 0 {
		return 0, &Error{Code: lk.CodeInvalidArguments, Message: fmt.Sprintf("%s must be a whole number of seconds, got %v", field, d)}
	}
	return int64(d / time.Second), nil
}

func mode(shared bool) lk.Mode {
	if shared {
		return lk.Shared
	}
	return lk.Exclusive
}

// acquireBody is POST /v1/acquire's body: the request and the wait.
type acquireBody struct {
	lk.AcquireRequest
	Wait int64 `json:"wait,omitempty"`
}

// AcquireOnce sends one acquire for lock and returns the answer as it is:
// granted, queued (when Wait ran out, or at once without one), deadlock, or
// withdrawn (a release from elsewhere withdrew the request during the
// wait). Nothing renews a granted lease and nothing withdraws a queued
// request: Acquire does both. Errors: an *Error for an error answer
// (ErrClientBusy, ErrInvalidTTL, ...), any other error when no answer was
// obtained.
func (c *Client) AcquireOnce(ctx context.Context, lock string, opts AcquireOptions) (lk.AcquireResult, error) {
	var res lk.AcquireResult
	ttl, err := seconds("ttl", opts.TTL)
	if err != nil {
		return res, err
	}
	wait, err := seconds("wait", opts.Wait)
	if err != nil {
		return res, err
	}
	body := acquireBody{lk.AcquireRequest{Client: opts.Client, Lock: lock, TTL: ttl, Mode: mode(opts.Shared)}, wait}
	err = c.do(ctx, http.MethodPost, pathAcquire, nil, body, &res)
	return res, err
}

// Renew renews client's lease on lock for ttl from now (L2); it may shorten
// the lease. It is a single request: a *Lease renews itself. Errors: an
// *Error with ErrNotHolder when client holds no live lease on lock,
// ErrInvalidTTL, ErrInvalidArguments.
func (c *Client) Renew(ctx context.Context, client, lock string, ttl time.Duration) (lk.RenewResult, error) {
	var res lk.RenewResult
	secs, err := seconds("ttl", ttl)
	if err == nil {
		err = c.do(ctx, http.MethodPost, pathRenew, nil, lk.RenewRequest{Client: client, Lock: lock, TTL: secs}, &res)
	}
	return res, err
}

// Release ends client's lease on lock (lk.Released), or withdraws its queued
// request (lk.Withdrawn). It is a single request; to end a *Lease, use its
// Release. Errors: an *Error with ErrNotHolder when client neither holds
// nor awaits lock.
func (c *Client) Release(ctx context.Context, client, lock string) (lk.ReleaseResult, error) {
	var res lk.ReleaseResult
	err := c.do(ctx, http.MethodPost, pathRelease, nil, lk.ReleaseRequest{Client: client, Lock: lock}, &res)
	return res, err
}

// Revoke ends client's live lease on lock now, as the holder's release
// would: the lock is handed over at this instant, and the next grant's higher
// token fences the revoked holder out of the store. The holder's *Lease
// learns it at its next renew (ErrNotHolder). It is not a contract
// operation; with an auth file only admins may revoke. The arguments come in
// the order of Renew and Release: client, then lock. Errors: an *Error with
// ErrNotHolder when client holds no live lease on lock, ErrForbidden when the
// principal is not an admin, ErrUnauthenticated without a valid token.
func (c *Client) Revoke(ctx context.Context, client, lock string) (lk.RevokeResult, error) {
	var res lk.RevokeResult
	err := c.do(ctx, http.MethodPost, pathRevoke, nil, lk.RevokeRequest{Client: client, Lock: lock}, &res)
	return res, err
}

// Write stores value under (lock, key) in the fenced store if token is at
// least the highest token accepted for lock (L6). Errors: an *Error with
// ErrStaleToken when a higher token was accepted, ErrInvalidArguments.
func (c *Client) Write(ctx context.Context, lock, key, value string, token int64) (lk.WriteResult, error) {
	var res lk.WriteResult
	err := c.do(ctx, http.MethodPost, pathWrite, nil, lk.WriteRequest{Lock: lock, Key: key, Value: value, Token: token}, &res)
	return res, err
}

// Read returns the last value the fenced store accepted for (lock, key),
// with the token of the write that stored it; Value is nil when it has none.
func (c *Client) Read(ctx context.Context, lock, key string) (lk.ReadResult, error) {
	var res lk.ReadResult
	err := c.do(ctx, http.MethodGet, pathRead, url.Values{"lock": {lock}, "key": {key}}, nil, &res)
	return res, err
}

// Inspect returns all of lock's holders, by token, and queue, oldest
// first, reading every page of them (InspectPage reads one). The answer's
// counts and Next are those of the last page.
func (c *Client) Inspect(ctx context.Context, lock string) (lk.InspectResult, error) {
	var all lk.InspectResult
	after := ""
	for {
		page, err := c.InspectPage(ctx, lock, after, lk.MaxLocksLimit)
		if err != nil {
			return all, err
		}
		if all.Lock == "" {
			all = page
		} else {
			all.Holders = append(all.Holders, page.Holders...)
			all.Queue = append(all.Queue, page.Queue...)
			all.HolderCount, all.QueueLength, all.Next = page.HolderCount, page.QueueLength, page.Next
		}
		if page.Next == nil {
			return all, nil
		}
		after = *page.Next
	}
}

// InspectPage returns a page of lock's holders, by token, then of its
// queue, oldest first: at most limit of them (0: the server's default,
// 100) after the cursor after ("" for the first page, else a page's Next),
// with the counts of both lists.
func (c *Client) InspectPage(ctx context.Context, lock, after string, limit int) (lk.InspectResult, error) {
	q := url.Values{"lock": {lock}}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var res lk.InspectResult
	err := c.do(ctx, http.MethodGet, pathInspect, q, nil, &res)
	return res, err
}

// Status returns what client holds and awaits: its age, the lock it waits
// for, and the first page of its holds (the server's default size, 100).
// The page's Next is non-nil when it holds more: StatusPage reads the
// following pages, AllHolds every hold.
func (c *Client) Status(ctx context.Context, client string) (lk.StatusResult, error) {
	return c.StatusPage(ctx, client, "", 0)
}

// StatusPage returns what client holds and awaits, with the page of its
// holds whose lock names sort after `after` ("" for the first), at most
// limit of them (0 means the server's default, 100; at most 1,000). The
// page's Next is the after of the next page, nil on the last.
func (c *Client) StatusPage(ctx context.Context, client, after string, limit int) (lk.StatusResult, error) {
	q := url.Values{"client": {client}}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if after != "" {
		q.Set("after", after)
	}
	var res lk.StatusResult
	err := c.do(ctx, http.MethodGet, pathStatus, q, nil, &res)
	return res, err
}

// AllHolds yields every lease client holds, by lock name, reading pages of
// the server's default size as it goes. It stops at the first error, which
// it yields. As AllLocks, it is not a snapshot: each page is read at its
// own time.
func (c *Client) AllHolds(ctx context.Context, client string) iter.Seq2[lk.Holder, error] {
	return func(yield func(lk.Holder, error) bool) {
		after := ""
		for {
			page, err := c.StatusPage(ctx, client, after, 0)
			if err != nil {
				yield(lk.Holder{}, err)
				return
			}
			for _, h := range page.Holds {
				if !yield(h, nil) {
					return
				}
			}
			if page.Next == nil {
				return
			}
			after = *page.Next
		}
	}
}

// Locks returns one page of the locks that have holders or waiters, by
// name: those after req.After whose names start with req.Prefix, at most
// req.Limit (0 means the server's default, 100). The page's Next is the
// After of the next page, nil on the last. AllLocks follows the pages.
func (c *Client) Locks(ctx context.Context, req lk.LocksRequest) (lk.LocksResult, error) {
	q := url.Values{}
	if req.Limit != 0 {
		q.Set("limit", strconv.Itoa(req.Limit))
	}
	if req.After != "" {
		q.Set("after", req.After)
	}
	if req.Prefix != "" {
		q.Set("prefix", req.Prefix)
	}
	var res lk.LocksResult
	err := c.do(ctx, http.MethodGet, pathLocks, q, nil, &res)
	return res, err
}

// AllLocks yields every lock that has holders or waiters and whose name
// starts with prefix, by name, reading pages of the server's default size
// as it goes. It stops at the first error, which it yields. A listing of a
// busy server is not a snapshot: each page is read at its own time.
func (c *Client) AllLocks(ctx context.Context, prefix string) iter.Seq2[lk.LockSummary, error] {
	return func(yield func(lk.LockSummary, error) bool) {
		req := lk.LocksRequest{Prefix: prefix}
		for {
			page, err := c.Locks(ctx, req)
			if err != nil {
				yield(lk.LockSummary{}, err)
				return
			}
			for _, l := range page.Locks {
				if !yield(l, nil) {
					return
				}
			}
			if page.Next == nil {
				return
			}
			req.After = *page.Next
		}
	}
}

// Health returns the server's health: it answers while the process lives,
// with the last time the server used and its version.
func (c *Client) Health(ctx context.Context) (lk.HealthResult, error) {
	var res lk.HealthResult
	err := c.do(ctx, http.MethodGet, pathHealth, nil, nil, &res)
	return res, err
}
