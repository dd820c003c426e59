package validate

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/leasekeeper/leasekeeper/client"
	"github.com/leasekeeper/leasekeeper/internal/e2e/history"
)

// The Go client's own promise (client.Lease.Lost): Lost is closed before a
// successor's lease can start, so that a job which stops work at Lost never
// works under the lock alongside the next holder. The leases are taken
// through LeaseLog, which notes when each Lease's Lost was closed and when
// its holder called Release; the grants stay out of the History, whose
// model has no lapses.

// The names of the checks of the client's Lost promise.
const (
	// CheckLostBeforeSuccessor: a lease's work ended (Lost closed, or
	// Release called) before the next lease of its lock was answered.
	CheckLostBeforeSuccessor = "lost-before-successor"
	// CheckLostBeforeExpiry: and before its expires_at, as the server last
	// told it, which is the earliest a successor's lease could start.
	CheckLostBeforeExpiry = "lost-before-expiry"
)

// lostMargin is how late past a lease's expires_at the instant its Lost
// was seen closed may be. The server's expires_at is whole seconds
// (floor(ts)+ttl, ts read when it handled the grant or renew, after the
// client sent it), and the lease ends at that very instant of this
// machine's wall clock, which the server reads; so the instant Lost was
// seen is read on the wall clock too, not on the History's monotonic
// clock, from which the wall clock may have drifted or been stepped since
// the History started. The client counts the lease lost at the send time of its
// last successful renew (or acquire) plus the ttl less a second, which is
// never after expires_at, but may be only a few milliseconds before it when
// ts fell just below a whole second. The instant recorded here comes after
// the client's timer fired, its renew's context ended and the scheduler
// woke the client's goroutine and then LeaseLog's: tens of milliseconds on
// a loaded 2-core machine, rarely more. 250 ms covers that; a client that
// forgot the second the server rounds away (Lost at send+ttl) is late by
// up to a second, past the margin three times in four for each lease lost.
const lostMargin = 250 * time.Millisecond

// LeaseRecord is a lease taken through a LeaseLog. Times are nanoseconds
// of the History's clock, but for the Wall ones, Unix nanoseconds of this
// machine's wall clock; server times are Unix seconds.
type LeaseRecord struct {
	Worker    int    `json:"worker"`
	Client    string `json:"client"`
	Lock      string `json:"lock"`
	Token     int64  `json:"token"`
	TTL       int64  `json:"ttl"`
	GrantedAt int64  `json:"granted_at"`
	// ExpiresAt is the last expires_at the server told the client: its
	// grant's, or its latest renew's that the client got an answer to.
	ExpiresAt int64 `json:"expires_at"`
	// Call and Return are the acquire's.
	Call   int64 `json:"call"`
	Return int64 `json:"return"`
	// Released is when the holder called Release, 0 if it did not.
	Released     int64 `json:"released,omitempty"`
	ReleasedWall int64 `json:"released_wall,omitempty"`
	// Lost is when Lost was seen closed, 0 if it was not; LostErr is the
	// Lease's Err then.
	Lost     int64  `json:"lost,omitempty"`
	LostWall int64  `json:"lost_wall,omitempty"`
	LostErr  string `json:"lost_err,omitempty"`
}

// end is when the holder's work under the lease ended: Lost closed or
// Release called, whichever came first; never if neither did.
func (r LeaseRecord) end() int64 { return firstOf(r.Lost, r.Released) }

// endWall is end on the wall clock.
func (r LeaseRecord) endWall() int64 { return firstOf(r.LostWall, r.ReleasedWall) }

// firstOf is the earlier of two instants, 0 meaning none; never if both
// are 0.
func firstOf(a, b int64) int64 {
	end := int64(never)
	if a > 0 {
		end = a
	}
	if b > 0 {
		end = min(end, b)
	}
	return end
}

func (r LeaseRecord) String() string {
	s := fmt.Sprintf("%s token %d of %s [%d, %d) acquired [%s, %s]", r.Lock, r.Token, r.Client, r.GrantedAt, r.ExpiresAt, ms(r.Call), ms(r.Return))
	if r.Released > 0 {
		s += ", Release called at " + ms(r.Released)
	}
	if r.Lost > 0 {
		s += fmt.Sprintf(", Lost at %s (%s)", ms(r.Lost), r.LostErr)
	}
	return s
}

// LeaseLog takes leases with the Go client (client.Client.Acquire, the
// Lease with its keep-alive) and records each in a LeaseRecord, for
// CheckLost. It is safe for concurrent use.
type LeaseLog struct {
	h    *history.History
	wg   sync.WaitGroup
	mu   sync.Mutex
	recs []*LeaseRecord
}

// NewLeaseLog returns a LeaseLog on h's clock.
func NewLeaseLog(h *history.History) *LeaseLog { return &LeaseLog{h: h} }

// LoggedLease is a Lease of a LeaseLog; call its Release, not the Lease's,
// so that the moment work stopped is noted.
type LoggedLease struct {
	*client.Lease
	log *LeaseLog
	rec *LeaseRecord
}

// Acquire takes lock through cl.Acquire with opts and, when granted, records
// the lease and watches its Lost. It returns Acquire's error otherwise.
func (ll *LeaseLog) Acquire(ctx context.Context, cl *client.Client, worker int, lock string, opts client.AcquireOptions) (*LoggedLease, error) {
	call := ll.h.Now()
	l, err := cl.Acquire(ctx, lock, opts)
	ret := ll.h.Now()
	if err != nil {
		return nil, err
	}
	ttl := int64(opts.TTL / time.Second)
	// expires_at is granted_at + ttl (L2); the Lease's ExpiresAt may
	// already hold a renew's.
	rec := &LeaseRecord{Worker: worker, Client: opts.Client, Lock: lock, Token: l.Token(), TTL: ttl,
		GrantedAt: l.GrantedAt().Unix(), ExpiresAt: l.GrantedAt().Unix() + ttl, Call: call, Return: ret}
	ll.mu.Lock()
	ll.recs = append(ll.recs, rec)
	ll.mu.Unlock()
	ll.wg.Go(func() {
		<-l.Lost()
		at, wall := ll.h.Now(), time.Now().UnixNano()
		// Once Lost is closed the keep-alive has stopped: ExpiresAt is
		// the last the server told.
		exp, lerr := l.ExpiresAt().Unix(), l.Err()
		ll.mu.Lock()
		defer ll.mu.Unlock()
		rec.Lost, rec.LostWall, rec.ExpiresAt = at, wall, max(rec.ExpiresAt, exp)
		if lerr != nil {
			rec.LostErr = lerr.Error()
		}
	})
	return &LoggedLease{Lease: l, log: ll, rec: rec}, nil
}

// Release notes that the holder's work ended now and releases the lease
// (client.Lease.Release).
func (l *LoggedLease) Release(ctx context.Context) error {
	at, wall := l.log.h.Now(), time.Now().UnixNano()
	l.log.mu.Lock()
	if l.rec.Released == 0 {
		l.rec.Released, l.rec.ReleasedWall = at, wall
	}
	l.log.mu.Unlock()
	return l.Lease.Release(ctx)
}

// Records waits until every lease's Lost was closed (release them all
// first) and returns the records.
func (ll *LeaseLog) Records() []LeaseRecord {
	ll.wg.Wait()
	ll.mu.Lock()
	defer ll.mu.Unlock()
	out := make([]LeaseRecord, len(ll.recs))
	for i, r := range ll.recs {
		out[i] = *r
	}
	return out
}

// CheckLost checks the client's promise on the records of a LeaseLog's
// exclusive leases: each lease's work ended (end) before the acquire of
// the lease with the next token of its lock returned
// (CheckLostBeforeSuccessor), and, on the wall clock (endWall), no later
// than its expires_at as the server last told it, within lostMargin
// (CheckLostBeforeExpiry). The second is the stronger: a successor's lease
// starts at that expires_at at the earliest, and its acquire returns later
// still.
func CheckLost(recs []LeaseRecord) []Violation {
	var vs violations
	byLock := map[string][]LeaseRecord{}
	for _, r := range recs {
		byLock[r.Lock] = append(byLock[r.Lock], r)
	}
	for _, rs := range byLock {
		slices.SortFunc(rs, func(a, b LeaseRecord) int { return cmp.Compare(a.Token, b.Token) })
		for i, p := range rs {
			end := p.end()
			if i+1 < len(rs) && end >= rs[i+1].Return {
				s := rs[i+1]
				vs.add(CheckLostBeforeSuccessor, "%v: still kept when the next lease was answered at %s: %v", p, ms(s.Return), s)
			}
			lapse := time.Unix(p.ExpiresAt, 0).UnixNano()
			if wall := p.endWall(); wall > lapse+int64(lostMargin) {
				late := "never"
				if wall != never {
					late = time.Duration(wall-lapse).Round(time.Millisecond).String() + " late"
				}
				vs.add(CheckLostBeforeExpiry, "%v: work ended %s by the wall clock, past its expires_at %d", p, late, p.ExpiresAt)
			}
		}
	}
	return vs.result()
}
