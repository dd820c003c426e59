// Package client is a Go client for the HTTP API that `leasekeeper serve`
// speaks (docs/api.md): acquire a lock with a lease that keeps itself alive,
// write to the fenced store with the lease's token, release.
//
//	c := client.New("http://127.0.0.1:7070")
//	lease, err := c.Acquire(ctx, "exports/daily", client.AcquireOptions{
//		Client: "etl-a", TTL: 30 * time.Second, Wait: 10 * time.Second,
//	})
//	if err != nil {
//		return err // ErrQueued, ErrDeadlock, ErrWithdrawn, or an *Error
//	}
//	defer lease.Release(ctx)
//	go work(lease.Token(), done) // writes with lease.Write: refused as stale once a successor wrote
//	select {
//	case <-lease.Lost():
//		return lease.Err() // stop working: someone else may hold the lock now
//	case <-done:
//	}
//
// A *Lease renews itself about every third of its ttl until Release is
// called or the lease is lost. Lost reports when the server refused a renew,
// or when renewing failed (the server unreachable, say) until the lease may
// have ended. Work done after that must not count on holding the lock: the
// fenced store's tokens are what keep a late writer from overwriting its
// successor.
//
// A job that needs several locks at once takes them with AcquireAll, in
// one canonical order (by name, byte-wise) within one wait:
//
//	set, err := c.AcquireAll(ctx, []client.LockSpec{{Lock: "orders"}, {Lock: "invoices"}},
//		client.AcquireOptions{Client: "etl-a", TTL: 30 * time.Second, Wait: 10 * time.Minute})
//	if err != nil {
//		return err // an *AcquireAllError naming the lock that failed; the others were released
//	}
//	defer set.Release(ctx)
//
// Taken one by one, etl-a holding orders and waiting for invoices while
// etl-b holds invoices and waits for orders is a deadlock, which the
// service breaks by aborting the younger (docs/contract.md section 4).
// Taken in one order, both ask for invoices first, and neither is ever a
// victim. The set's leases renew together; its Lost closes when any is
// lost.
//
// A fence in the job's own database (package fence, docs/fencing.md)
// checks the lease's token where the job writes; ReportStale tells the
// server about a refusal, for its metric and console.
//
// Errors the server answers are *Error values, the API's error object
// {"error": code, "message": ...} with its status, that errors.Is matches
// against the sentinels (ErrNotHolder, ErrStaleToken, ...). Acquire's
// results other than a grant are errors too: *QueuedError (ErrQueued) and
// *DeadlockError (ErrDeadlock). Any other error means no answer was
// obtained: the server was unreachable, ctx ended, or what answered did not
// speak the API.
//
// An acquire that may have reached the server without an answer (the server
// died during the wait, ctx ended, a 5xx) may have left the client queued,
// to be granted a lease nobody renews. Acquire withdraws such a request,
// sending the release again while no answer comes, for up to
// AcquireOptions.WithdrawFor (Wait plus TTL by default), and returns an
// *UnknownOutcomeError that says whether the server confirmed the withdraw.
//
// A server with per-principal limits answers 429 rate_limited with
// Retry-After; every call retries after that delay, within its ctx, for up
// to a minute (WithRateLimitWait). A 429 means the server did nothing, so
// retrying is safe whatever the request.
//
// A server started with --auth-file wants a bearer token, WithBearerToken;
// one with a certificate from a private CA is reached at an https:// URL
// with WithTLSConfig (LoadCAFile builds the configuration from a PEM file).
//
// The single-request methods (AcquireOnce, Renew, Release, Revoke, Inspect,
// Status, Locks, Store, Graph, Write, Read, Health) send one request and return the API's
// answer as the typed result of package leasekeeper, the same types the
// server encodes; AllLocks follows the pages of the locks listing.
package client
