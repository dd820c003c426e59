package client

import (
	"context"
	"net/http"

	lk "github.com/leasekeeper/leasekeeper"
)

const pathUnfence = "/v1/unfence"

// Unfence sets the fenced store's fence for lock back to the lock's last
// issued token, when it is above it: the repair of a lock fenced by a write
// with a token never granted (accepted by a server without
// --strict-fencing), after which no holder could write again. The result
// gives the fence before and after. It is not a contract operation; with an
// auth file only admins may unfence. Errors: an *Error with ErrForbidden
// when the principal is not an admin, ErrUnauthenticated without a valid
// token, ErrInvalidArguments.
func (c *Client) Unfence(ctx context.Context, lock string) (lk.UnfenceResult, error) {
	var res lk.UnfenceResult
	err := c.do(ctx, http.MethodPost, pathUnfence, nil, lk.UnfenceRequest{Lock: lock}, &res)
	return res, err
}
