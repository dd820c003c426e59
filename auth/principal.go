package auth

import (
	"net/http"

	"github.com/leasekeeper/leasekeeper/server"
)

var _ server.Identifier = (*Authorizer)(nil)

// Principal returns the name of the principal whose token r carries, ""
// when none: the server notes who acted as each client id, so that the
// audit line of a deadlock abort names the principals on both sides.
func (a *Authorizer) Principal(r *http.Request) string {
	if p := a.authenticate(r); p != nil {
		return p.Name
	}
	return ""
}
