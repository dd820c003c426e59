package server

import lk "github.com/leasekeeper/leasekeeper"

// POST /v1/stale: a job's fence (package fence) refused its token, and the
// job tells the server, for the metric, the audit log, the event stream
// and the console. The Authorizer sees the report's client id, so a
// client principal reports only as its own client ids; the service then
// takes only a token granted to that client on that lock.
func decodeStale(f *fields) lk.StaleRequest {
	return lk.StaleRequest{Client: f.name("client"), Lock: f.name("lock"), Token: f.integer("token", true, 0),
		Newer: f.integer("newer", true, 0), Resource: f.name("resource")}
}
