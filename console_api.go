package leasekeeper

import "fmt"

// The reads behind the operator console (GET /v1/store, GET /v1/graph):
// what the fenced store holds for a lock, and the wait-for graph around a
// lock or a client. Like inspect and the locks listing they are operator
// reads: a reader or an admin may call them, a client principal may not.

// StoreRequest asks for a page of the fenced store's keys of Lock, in key
// order: those after After ("" for the first page), at most Limit of them.
type StoreRequest struct {
	Lock  string
	After string
	Limit int
}

func (r StoreRequest) Validate() error {
	if err := nonEmpty("lock", r.Lock); err != nil {
		return err
	}
	if r.Limit < 1 || r.Limit > MaxLocksLimit {
		return Errorf(CodeInvalidArguments, fmt.Sprintf("limit must be from 1 to %d, got %d", MaxLocksLimit, r.Limit))
	}
	return nil
}

// StoreKey is one key of a lock's fenced store: the token of the write that
// stored its value, when, and the value's size. The value itself is read
// with GET /v1/read: a page of 1,000 values of 64 KiB would be 64 MiB.
type StoreKey struct {
	Key        string `json:"key" db:"key"`
	Token      int64  `json:"token" db:"token"`
	WrittenAt  int64  `json:"written_at" db:"written_at"`
	ValueBytes int64  `json:"value_bytes" db:"value_bytes"`
}

// StoreResult is a page of a lock's fenced store. Highest is the highest
// token the store accepted for the lock (its fence), nil when it never
// accepted a write for it; KeyCount is how many keys it holds in all. Next
// is the After of the next page, nil on the last one.
type StoreResult struct {
	Lock     string     `json:"lock"`
	Highest  *int64     `json:"highest_token"`
	KeyCount int64      `json:"key_count"`
	Keys     []StoreKey `json:"keys"`
	Next     *string    `json:"next"`
}

// MaxGraphNodes bounds the wait-for graph an answer of GET /v1/graph
// holds: locks and clients together.
const MaxGraphNodes = 300

// GraphRequest asks for the connected component of the wait-for graph
// around Lock or around Client (exactly one of them).
type GraphRequest struct {
	Lock   string
	Client string
}

func (r GraphRequest) Validate() error {
	if (r.Lock == "") == (r.Client == "") {
		return Errorf(CodeInvalidArguments, "give exactly one of lock and client")
	}
	return nil
}

// GraphLock is a lock of the graph and how many clients wait for it in all
// (the graph may hold fewer of them when it was cut).
type GraphLock struct {
	Lock    string `json:"lock"`
	Waiting int64  `json:"waiting"`
}

// GraphClient is a client of the graph and its age (D1).
type GraphClient struct {
	Client string `json:"client"`
	Age    int64  `json:"age"`
}

// GraphWait is an edge from a client to the lock it waits for. The waits
// of one lock come in queue order; GET /v1/inspect gives their ranks.
type GraphWait struct {
	Client   string `json:"client"`
	Lock     string `json:"lock"`
	Mode     Mode   `json:"mode"`
	QueuedAt int64  `json:"queued_at"`
}

// GraphResult is the connected component of the wait-for graph around the
// request's lock or client: clients wait for locks (Waits), locks are held
// by clients (Holds). A client waits for the lock's holders and for the
// waiters ahead of it (D2), so a wait cycle shows as a cycle through these
// edges. Cut is true when the component has more than MaxGraphNodes nodes:
// the answer then holds those nearest the start.
type GraphResult struct {
	Locks   []GraphLock   `json:"locks"`
	Clients []GraphClient `json:"clients"`
	Holds   []Holder      `json:"holds"` // an edge from a lock to a client that holds it
	Waits   []GraphWait   `json:"waits"`
	Cut     bool          `json:"cut"`
}
