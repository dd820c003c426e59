package leasekeeper

// UnfenceRequest sets the fenced store's fence for Lock back to the lock's
// last issued token: an administrator's repair of a lock fenced beyond any
// token ever granted (a write above last_token accepted before serve
// --strict-fencing, or under --strict-fencing=false), after which no
// holder's write would be accepted again. Not an operation of the contract.
type UnfenceRequest struct {
	Lock string `json:"lock"`
	// By names who asked, for the audit log: the server's principal, ""
	// when it has none. Not part of the HTTP API.
	By string `json:"-"`
}

func (r UnfenceRequest) Validate() error { return nonEmpty("lock", r.Lock) }

// UnfenceResult is unfence's answer: OK, the fence before (Was) and now
// (Highest), each the highest token the store accepts writes from, 0 when
// it accepted none. They are equal when the fence was not above the lock's
// last issued token: unfence then changes nothing, so that it never lowers
// a fence that honest holders have raised.
type UnfenceResult struct {
	Outcome Outcome `json:"outcome"`
	Was     int64   `json:"was"`
	Highest int64   `json:"highest"`
}
