package client

import (
	"context"
	"encoding/json"
	"fmt"
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
)

// seconds writes d as the API's number of seconds. A d that is not whole
// seconds goes out with its fraction, for the server to refuse as invalid
// arguments: the server is the one judge of what is valid.
func seconds(d time.Duration) json.Number {
	if d%time.Second == 0 {
		return json.Number(strconv.FormatInt(int64(d/time.Second), 10))
	}
	return json.Number(strconv.FormatFloat(d.Seconds(), 'f', -1, 64))
}

func mode(shared bool) lk.Mode {
	if shared {
		return lk.Shared
	}
	return lk.Exclusive
}

// AcquireCall is POST /v1/acquire for lock with opts.
func AcquireCall(lock string, opts AcquireOptions) Call {
	body := struct {
		Client string      `json:"client"`
		Lock   string      `json:"lock"`
		TTL    json.Number `json:"ttl"`
		Mode   lk.Mode     `json:"mode"`
		Wait   json.Number `json:"wait,omitempty"`
	}{opts.Client, lock, seconds(opts.TTL), mode(opts.Shared), ""}
	if opts.Wait != 0 {
		body.Wait = seconds(opts.Wait)
	}
	return Call{Method: http.MethodPost, Path: pathAcquire, Body: body}
}

// RenewCall is POST /v1/renew.
func RenewCall(client, lock string, ttl time.Duration) Call {
	return Call{Method: http.MethodPost, Path: pathRenew, Body: struct {
		Client string      `json:"client"`
		Lock   string      `json:"lock"`
		TTL    json.Number `json:"ttl"`
	}{client, lock, seconds(ttl)}}
}

// ReleaseCall is POST /v1/release.
func ReleaseCall(client, lock string) Call {
	return Call{Method: http.MethodPost, Path: pathRelease, Body: struct {
		Client string `json:"client"`
		Lock   string `json:"lock"`
	}{client, lock}}
}

// RevokeCall is POST /v1/revoke: client's lease on lock ends now.
func RevokeCall(client, lock string) Call {
	return Call{Method: http.MethodPost, Path: pathRevoke, Body: struct {
		Client string `json:"client"`
		Lock   string `json:"lock"`
	}{client, lock}}
}

// WriteCall is POST /v1/write.
func WriteCall(lock, key, value string, token int64) Call {
	return Call{Method: http.MethodPost, Path: pathWrite, Body: struct {
		Lock  string `json:"lock"`
		Key   string `json:"key"`
		Value string `json:"value"`
		Token int64  `json:"token"`
	}{lock, key, value, token}}
}

// ReadCall is GET /v1/read.
func ReadCall(lock, key string) Call {
	return Call{Method: http.MethodGet, Path: pathRead, Query: url.Values{"lock": {lock}, "key": {key}}}
}

// InspectCall is GET /v1/inspect.
func InspectCall(lock string) Call {
	return Call{Method: http.MethodGet, Path: pathInspect, Query: url.Values{"lock": {lock}}}
}

// StatusCall is GET /v1/status.
func StatusCall(client string) Call {
	return Call{Method: http.MethodGet, Path: pathStatus, Query: url.Values{"client": {client}}}
}

// LocksCall is GET /v1/locks.
func LocksCall() Call {
	return Call{Method: http.MethodGet, Path: pathLocks}
}

// Renewal is renew's result.
type Renewal struct {
	Token     int64
	ExpiresAt time.Time // whole seconds of the server's clock
}

// Renew renews client's lease on lock for ttl from now (L2); it may shorten
// the lease. It is a single request: a *Lease renews itself. Errors: an
// *Error with ErrNotHolder when client holds no live lease on lock,
// ErrInvalidTTL, ErrInvalidArguments.
func (c *Client) Renew(ctx context.Context, client, lock string, ttl time.Duration) (Renewal, error) {
	res, err := c.call(ctx, RenewCall(client, lock, ttl))
	if err != nil {
		return Renewal{}, err
	}
	return decodeRenew(res)
}

func decodeRenew(res *Result) (Renewal, error) {
	var tag string
	var r Renewal
	if err := decodeTuple(res.JSON, &tag, &r.Token, (*unixTime)(&r.ExpiresAt)); err != nil || tag != "renewed" {
		return Renewal{}, fmt.Errorf("%s: unexpected answer %.200s", res.path, res.JSON)
	}
	return r, nil
}

// ReleaseOutcome is release's result (L7).
type ReleaseOutcome string

const (
	Released  ReleaseOutcome = "released"  // client held the lock; its lease ended
	Withdrawn ReleaseOutcome = "withdrawn" // client was waiting; its request left the queue
)

// Release ends client's lease on lock, or withdraws its queued request. It is
// a single request; to end a *Lease, use its Release. Errors: an *Error with
// ErrNotHolder when client neither holds nor awaits lock.
func (c *Client) Release(ctx context.Context, client, lock string) (ReleaseOutcome, error) {
	res, err := c.call(ctx, ReleaseCall(client, lock))
	if err != nil {
		return "", err
	}
	var out ReleaseOutcome
	if err := decode(res, &out); err != nil {
		return "", err
	}
	if out != Released && out != Withdrawn {
		return "", fmt.Errorf("%s: unexpected answer %.200s", res.path, res.JSON)
	}
	return out, nil
}

// Revoke ends client's live lease on lock now, as the holder's release
// would: the lock is handed over at this instant, and the next grant's higher
// token fences the revoked holder out of the store. The holder's *Lease
// learns it at its next renew (ErrNotHolder). It is not a contract
// operation; with an auth file only admins may revoke. The arguments come in
// the order of Renew and Release: client, then lock. Errors: an *Error with ErrNotHolder when
// client holds no live lease on lock, ErrForbidden when the principal is not
// an admin, ErrUnauthenticated without a valid token.
func (c *Client) Revoke(ctx context.Context, client, lock string) error {
	res, err := c.call(ctx, RevokeCall(client, lock))
	if err != nil {
		return err
	}
	var out string
	if err := decode(res, &out); err != nil {
		return err
	}
	if out != "revoked" {
		return fmt.Errorf("%s: unexpected answer %.200s", res.path, res.JSON)
	}
	return nil
}

// Write stores value under (lock, key) in the fenced store if token is at
// least the highest token accepted for lock (L6). Errors: an *Error with
// ErrStaleToken when a higher token was accepted, ErrInvalidArguments.
func (c *Client) Write(ctx context.Context, lock, key, value string, token int64) error {
	res, err := c.call(ctx, WriteCall(lock, key, value, token))
	if err != nil {
		return err
	}
	var ok string
	if err := decode(res, &ok); err != nil {
		return err
	}
	if ok != "ok" {
		return fmt.Errorf("%s: unexpected answer %.200s", res.path, res.JSON)
	}
	return nil
}

// Read returns the last value the fenced store accepted for (lock, key);
// found is false when it has none.
func (c *Client) Read(ctx context.Context, lock, key string) (value string, found bool, err error) {
	res, err := c.call(ctx, ReadCall(lock, key))
	if err != nil {
		return "", false, err
	}
	var v *string
	if err := decode(res, &v); err != nil {
		return "", false, err
	}
	if v == nil {
		return "", false, nil
	}
	return *v, true, nil
}

// LockState is inspect's result (S4).
type LockState struct {
	Holders []Holder `json:"holders"` // by token, lowest first
	Queue   []Waiter `json:"queue"`   // oldest first
}

// Holder is one lease on a lock; its JSON form is [client, mode, token, expires_at].
type Holder struct {
	Client    string
	Mode      lk.Mode
	Token     int64
	ExpiresAt time.Time
}

func (h *Holder) UnmarshalJSON(b []byte) error {
	return decodeTuple(b, &h.Client, &h.Mode, &h.Token, (*unixTime)(&h.ExpiresAt))
}

// Waiter is one queued request; its JSON form is [client, mode].
type Waiter struct {
	Client string
	Mode   lk.Mode
}

func (w *Waiter) UnmarshalJSON(b []byte) error {
	return decodeTuple(b, &w.Client, &w.Mode)
}

// Inspect returns lock's holders and queue.
func (c *Client) Inspect(ctx context.Context, lock string) (*LockState, error) {
	res, err := c.call(ctx, InspectCall(lock))
	if err != nil {
		return nil, err
	}
	var s LockState
	if err := decode(res, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ClientStatus is status's result (D6).
type ClientStatus struct {
	Age     int64  `json:"age"`     // registration number (D1); 0 when the client is not registered
	Holds   []Hold `json:"holds"`   // by lock name
	Waiting string `json:"waiting"` // the lock it waits for; "" when none
}

// Hold is one lease of a client; its JSON form is [lock, mode, token, expires_at].
type Hold struct {
	Lock      string
	Mode      lk.Mode
	Token     int64
	ExpiresAt time.Time
}

func (h *Hold) UnmarshalJSON(b []byte) error {
	return decodeTuple(b, &h.Lock, &h.Mode, &h.Token, (*unixTime)(&h.ExpiresAt))
}

// Status returns what client holds and awaits.
func (c *Client) Status(ctx context.Context, client string) (*ClientStatus, error) {
	res, err := c.call(ctx, StatusCall(client))
	if err != nil {
		return nil, err
	}
	var s ClientStatus
	if err := decode(res, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// LockSummary is one entry of the locks listing.
type LockSummary struct {
	Lock    string   `json:"lock"`
	Holders []Holder `json:"holders"`
	Waiting int64    `json:"waiting"` // the queue's length
}

// Locks lists every lock that has holders or waiters, by name.
func (c *Client) Locks(ctx context.Context) ([]LockSummary, error) {
	res, err := c.call(ctx, LocksCall())
	if err != nil {
		return nil, err
	}
	var s []LockSummary
	if err := decode(res, &s); err != nil {
		return nil, err
	}
	return s, nil
}

// unixTime decodes a JSON integer of Unix seconds into a time.Time.
type unixTime time.Time

func (t *unixTime) UnmarshalJSON(b []byte) error {
	var s int64
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*t = unixTime(time.Unix(s, 0))
	return nil
}

// decodeTuple decodes a JSON array of exactly len(dst) elements into dst.
func decodeTuple(b []byte, dst ...any) error {
	var elems []json.RawMessage
	if err := json.Unmarshal(b, &elems); err != nil {
		return err
	}
	if len(elems) != len(dst) {
		return fmt.Errorf("an array of %d elements, want %d", len(elems), len(dst))
	}
	for i, e := range elems {
		if err := json.Unmarshal(e, dst[i]); err != nil {
			return fmt.Errorf("element %d: %w", i, err)
		}
	}
	return nil
}
