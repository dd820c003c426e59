package auth

import (
	"net/http"

	"github.com/leasekeeper/leasekeeper/internal/server"
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

var _ server.ClientScoper = (*Authorizer)(nil)

// ClientScope returns, for a client principal, whether a client id is one
// of its own (its patterns): its writes to the fenced store must carry a
// token granted to one of them. nil for the other roles: an admin acts as
// any client id, and a reader does not write.
func (a *Authorizer) ClientScope(r *http.Request) func(client string) bool {
	p := a.authenticate(r)
	if p == nil || p.Role != RoleClient {
		return nil
	}
	return p.matches
}
