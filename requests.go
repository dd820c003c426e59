package leasekeeper

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// The operations' requests: one type per operation of the contract (acquire,
// renew, release, inspect, status, write, read) and of the HTTP API alone
// (revoke, locks). Their JSON form is the HTTP API's request body.
//
// Validate checks what a request's Go type cannot say: names not empty, a
// known mode, a token >= 1, every check of rule 7 before the ttl's range
// (rule 8). Its errors name the field.

// AcquireRequest asks for Lock on behalf of Client with a lease of TTL
// seconds (L4, S2).
type AcquireRequest struct {
	Client string `json:"client"`
	Lock   string `json:"lock"`
	TTL    int64  `json:"ttl"`
	Mode   Mode   `json:"mode"` // Shared or Exclusive; the decoders make an absent mode Exclusive
}

func (r AcquireRequest) Validate() error {
	if err := nonEmpty("client", r.Client, "lock", r.Lock); err != nil {
		return err
	}
	if !r.Mode.Valid() {
		return Errorf(CodeInvalidArguments, `mode must be "shared" or "exclusive", got `+strconv.Quote(string(r.Mode)))
	}
	return checkTTL(r.TTL)
}

// RenewRequest sets Client's lease on Lock to end TTL seconds from now (L2).
type RenewRequest struct {
	Client string `json:"client"`
	Lock   string `json:"lock"`
	TTL    int64  `json:"ttl"`
}

func (r RenewRequest) Validate() error {
	if err := nonEmpty("client", r.Client, "lock", r.Lock); err != nil {
		return err
	}
	return checkTTL(r.TTL)
}

// ReleaseRequest ends Client's lease on Lock, or withdraws its place in the
// lock's queue (L7).
type ReleaseRequest struct {
	Client string `json:"client"`
	Lock   string `json:"lock"`
}

func (r ReleaseRequest) Validate() error { return nonEmpty("client", r.Client, "lock", r.Lock) }

// RevokeRequest ends Client's live lease on Lock now, as its release would;
// an administrator's operation of the HTTP API, not of the contract.
type RevokeRequest struct {
	Client string `json:"client"`
	Lock   string `json:"lock"`
}

func (r RevokeRequest) Validate() error { return nonEmpty("client", r.Client, "lock", r.Lock) }

// InspectRequest asks for Lock's holders and queue (S4).
type InspectRequest struct {
	Lock string `json:"lock"`
	// Limit and After page the holders (by token) and then the queue
	// (oldest first) as one list: at most Limit entries after the cursor
	// After ("" for the first page; a page's Next otherwise). Limit 0
	// means all of them, as the contract's inspect (and so the replay)
	// has it; the HTTP API's limit is 1 to MaxLocksLimit,
	// DefaultLocksLimit when absent.
	Limit int    `json:"limit,omitempty"`
	After string `json:"after,omitempty"`
}

func (r InspectRequest) Validate() error {
	if err := nonEmpty("lock", r.Lock); err != nil {
		return err
	}
	if r.Limit < 0 || r.Limit > MaxLocksLimit {
		return Errorf(CodeInvalidArguments, fmt.Sprintf("limit must be from 1 to %d (or 0 for all), got %d", MaxLocksLimit, r.Limit))
	}
	if _, _, ok := ParseInspectCursor(r.After); !ok {
		return Errorf(CodeInvalidArguments, "after must be an inspect page's next (h:TOKEN or q:N), got "+strconv.Quote(r.After))
	}
	return nil
}

// ParseInspectCursor reads an inspect page's cursor: "" (the start),
// "h:TOKEN" (holders after that token) or "q:N" (the queue after its entry
// number N). ok is false for anything else.
func ParseInspectCursor(after string) (queue bool, n int64, ok bool) {
	if after == "" {
		return false, 0, true
	}
	if len(after) < 3 || after[1] != ':' || (after[0] != 'h' && after[0] != 'q') {
		return false, 0, false
	}
	n, err := strconv.ParseInt(after[2:], 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != after[2:] {
		return false, 0, false
	}
	return after[0] == 'q', n, true
}

// StatusRequest asks what Client holds and waits for (D6).
type StatusRequest struct {
	Client string `json:"client"`
	// WithoutPosition leaves the rank of the client's wait out of the
	// answer (Waiting.Position 0). Counting the waiters ahead costs what
	// the queue holds ahead; the contract's status has no rank, and the
	// replay sets this so that statuses of every waiter of a long queue
	// stay linear (docs/contract.md section 6). Not part of the HTTP API.
	WithoutPosition bool `json:"-"`
	// Limit and After page the holds as the locks listing pages locks:
	// at most Limit of those whose lock names sort after After ("" for
	// the first page). Limit 0 means all of them, as the contract's status
	// (and so the replay) has it; the HTTP API's limit is 1 to
	// MaxLocksLimit, DefaultLocksLimit when absent.
	Limit int    `json:"limit,omitempty"`
	After string `json:"after,omitempty"`
}

func (r StatusRequest) Validate() error {
	if err := nonEmpty("client", r.Client); err != nil {
		return err
	}
	if r.Limit < 0 || r.Limit > MaxLocksLimit {
		return Errorf(CodeInvalidArguments, fmt.Sprintf("limit must be from 1 to %d (or 0 for all), got %d", MaxLocksLimit, r.Limit))
	}
	return nil
}

// WriteRequest stores Value under (Lock, Key) in the fenced store, if Token
// is not lower than the highest token accepted for Lock (L6).
type WriteRequest struct {
	Lock  string `json:"lock"`
	Key   string `json:"key"`
	Value string `json:"value"`
	Token int64  `json:"token"`
}

func (r WriteRequest) Validate() error {
	if err := nonEmpty("lock", r.Lock, "key", r.Key, "value", r.Value); err != nil {
		return err
	}
	if r.Token < 1 {
		return Errorf(CodeInvalidArguments, fmt.Sprintf("token must be an integer >= 1, got %d", r.Token))
	}
	return nil
}

// ReadRequest asks for the fenced store's value of (Lock, Key).
type ReadRequest struct {
	Lock string `json:"lock"`
	Key  string `json:"key"`
}

func (r ReadRequest) Validate() error { return nonEmpty("lock", r.Lock, "key", r.Key) }

// The bounds of a page of the locks listing (GET /v1/locks) and of a
// status's holds (GET /v1/status).
const (
	DefaultLocksLimit = 100
	MaxLocksLimit     = 1000
)

// LocksRequest asks for a page of the locks that have holders or waiters,
// in name order: those after After (all when ""), whose names start with
// Prefix, at most Limit of them.
type LocksRequest struct {
	Prefix string
	After  string
	Limit  int
}

func (r LocksRequest) Validate() error {
	if r.Limit < 1 || r.Limit > MaxLocksLimit {
		return Errorf(CodeInvalidArguments, fmt.Sprintf("limit must be from 1 to %d, got %d", MaxLocksLimit, r.Limit))
	}
	return nil
}

// Integer reads a JSON number as the contract's integer (rule 3): written
// without fraction or exponent, and within an int64. 5.0 and 1e3 are not.
func Integer(n json.Number) (int64, bool) {
	if strings.ContainsAny(string(n), ".eE") {
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	return i, err == nil
}

// nonEmpty checks pairs of a field's name and its value.
func nonEmpty(fieldsAndValues ...string) error {
	for i := 0; i+1 < len(fieldsAndValues); i += 2 {
		if fieldsAndValues[i+1] == "" {
			return Errorf(CodeInvalidArguments, fieldsAndValues[i]+" must be a non-empty string")
		}
	}
	return nil
}

func checkTTL(ttl int64) error {
	if ttl < 1 || ttl > MaxTTL {
		return Errorf(CodeInvalidTTL, fmt.Sprintf("ttl must be from 1 to %d seconds, got %d", MaxTTL, ttl))
	}
	return nil
}

// HistoryRequest asks for a page of the grant history (GET /v1/history):
// of one lock (Lock) or of one client (Client), exactly one of them, newest
// first. Before is the Next of the previous page ("" for the first): for a
// lock, the token below which the page starts; for a client, the cursor
// that page's Next gave. Limit is 1 to MaxLocksLimit, as the locks
// listing's.
type HistoryRequest struct {
	Lock   string `json:"lock,omitempty"`
	Client string `json:"client,omitempty"`
	Before string `json:"before,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

func (r HistoryRequest) Validate() error {
	if (r.Lock == "") == (r.Client == "") {
		return Errorf(CodeInvalidArguments, "give exactly one of lock and client")
	}
	if r.Limit < 1 || r.Limit > MaxLocksLimit {
		return Errorf(CodeInvalidArguments, fmt.Sprintf("limit must be from 1 to %d, got %d", MaxLocksLimit, r.Limit))
	}
	if r.Before == "" {
		return nil
	}
	if r.Lock != "" {
		if t, err := strconv.ParseInt(r.Before, 10, 64); err != nil || t < 1 {
			return Errorf(CodeInvalidArguments, "before must be a token, an integer >= 1, got "+strconv.Quote(r.Before))
		}
		return nil
	}
	if _, ok := ParseClientCursor(r.Before); !ok {
		return Errorf(CodeInvalidArguments, "before must be the next of a client's previous page, got "+strconv.Quote(r.Before))
	}
	return nil
}

// ClientCursor is where a page of a client's history starts: after the
// grant (GrantedAt, Lock, Token), in the newest-first order of that history.
type ClientCursor struct {
	GrantedAt int64
	Token     int64
	Lock      string
}

// String writes the cursor as a page's Next: "GRANTED_AT,TOKEN,LOCK" (the
// lock last, as a lock name may hold commas).
func (c ClientCursor) String() string {
	return strconv.FormatInt(c.GrantedAt, 10) + "," + strconv.FormatInt(c.Token, 10) + "," + c.Lock
}

// ParseClientCursor reads what ClientCursor.String wrote.
func ParseClientCursor(s string) (ClientCursor, bool) {
	at, rest, ok1 := strings.Cut(s, ",")
	tok, lock, ok2 := strings.Cut(rest, ",")
	if !ok1 || !ok2 || lock == "" {
		return ClientCursor{}, false
	}
	a, err1 := strconv.ParseInt(at, 10, 64)
	t, err2 := strconv.ParseInt(tok, 10, 64)
	if err1 != nil || err2 != nil || t < 1 {
		return ClientCursor{}, false
	}
	return ClientCursor{GrantedAt: a, Token: t, Lock: lock}, true
}
