package leasekeeper

import "fmt"

// DeleteRequest removes Key from Lock's fenced store, fenced as a write is
// (L6): Token must not be lower than the highest token the store accepted
// for Lock, and it becomes the highest. Client is who deletes: the server
// lets a principal delete only as its own client ids and, under strict
// fencing, only with a token granted to Client. Not an operation of the
// contract: it lets a holder empty what it, or a holder before it, stored.
type DeleteRequest struct {
	Client string `json:"client"`
	Lock   string `json:"lock"`
	Key    string `json:"key"`
	Token  int64  `json:"token"`
}

func (r DeleteRequest) Validate() error {
	if err := nonEmpty("client", r.Client, "lock", r.Lock, "key", r.Key); err != nil {
		return err
	}
	if r.Token < 1 {
		return Errorf(CodeInvalidArguments, fmt.Sprintf("token must be an integer >= 1, got %d", r.Token))
	}
	return nil
}

// DeleteResult is delete's answer: OK, and whether the key had a value
// (a delete of a key without one still raises the fence).
type DeleteResult struct {
	Outcome Outcome `json:"outcome"`
	Deleted bool    `json:"deleted"`
}

// StoreClearRequest removes every key of Lock's fenced store, whoever wrote
// them, and keeps its fence: an administrator's clean-up of a store that a
// holder filled and left. Not an operation of the contract.
type StoreClearRequest struct {
	Lock string `json:"lock"`
}

func (r StoreClearRequest) Validate() error { return nonEmpty("lock", r.Lock) }

// StoreClearResult is store clear's answer: OK, and the keys and the bytes
// of keys and values removed.
type StoreClearResult struct {
	Outcome Outcome `json:"outcome"`
	Keys    int64   `json:"keys"`
	Bytes   int64   `json:"bytes"`
}
