package client

import (
	"context"
	"net/http"

	lk "github.com/leasekeeper/leasekeeper"
)

const (
	pathDelete     = "/v1/delete"
	pathStoreClear = "/v1/store/clear"
)

// Delete removes key from lock's fenced store as client, if token is at
// least the highest token accepted for lock (L6, as Write), raising the
// fence to it. Deleted in the result tells whether the key had a value.
// Errors: an *Error with ErrStaleToken when a higher token was accepted,
// ErrTokenNotGranted when token was not granted to client (a server with
// --strict-fencing), ErrForbidden for a client id beyond the principal's.
func (c *Client) Delete(ctx context.Context, client, lock, key string, token int64) (lk.DeleteResult, error) {
	var res lk.DeleteResult
	err := c.do(ctx, http.MethodPost, pathDelete, nil, lk.DeleteRequest{Client: client, Lock: lock, Key: key, Token: token}, &res)
	return res, err
}

// StoreClear removes every key of lock's fenced store, whoever wrote it,
// and keeps the fence; the result counts the keys and bytes removed. With
// an auth file only admins may clear a store: ErrForbidden otherwise.
func (c *Client) StoreClear(ctx context.Context, lock string) (lk.StoreClearResult, error) {
	var res lk.StoreClearResult
	err := c.do(ctx, http.MethodPost, pathStoreClear, nil, lk.StoreClearRequest{Lock: lock}, &res)
	return res, err
}

// Delete removes key from the fenced store with the lease's client and
// token (Client.Delete).
func (l *Lease) Delete(ctx context.Context, key string) error {
	_, err := l.c.Delete(ctx, l.client, l.lock, key, l.token)
	return err
}
