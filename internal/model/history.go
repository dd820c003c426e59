package model

import (
	"cmp"
	"slices"
)

// The grant history: which client each token went to, and how and when its
// lease ended, for diff-testing the service's grants table. The contract's
// results never show it; a model keeps it only when asked (KeepHistory).

// How a lease ends, as the grants table says.
const (
	endReleased = "released"
	endLapsed   = "lapsed"
	endAborted  = "aborted"
)

// Grant is one grant of the history. Ended is "" while the lease is live;
// EndedAt is the release's or abort's ts, or for a lapse its expires_at.
type Grant struct {
	Lock      string
	Token     int64
	Client    string
	Mode      string
	GrantedAt int64
	ExpiresAt int64
	Ended     string
	EndedAt   int64

	lease *lease // for ExpiresAt, which renewals move
}

// KeepHistory makes m record every grant from now on.
func (m *Model) KeepHistory() {
	if m.history == nil {
		m.history = []*Grant{}
	}
}

// History returns every grant recorded, by lock name and token.
func (m *Model) History() []Grant {
	out := make([]Grant, 0, len(m.history))
	for _, g := range m.history {
		c := *g
		c.ExpiresAt, c.lease = g.lease.expiresAt, nil
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Grant) int {
		return cmp.Or(cmp.Compare(a.Lock, b.Lock), cmp.Compare(a.Token, b.Token))
	})
	return out
}

// Clock returns the model's current time; ok is false before the first
// operation moved it.
func (m *Model) Clock() (ts int64, ok bool) { return m.now, m.clockSet }
