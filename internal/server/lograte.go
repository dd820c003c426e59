package server

import (
	"sync"
	"time"
)

// Refused requests (401, 403) reach each log (the operational log, the
// audit log) at most RefusalLogRate a second after a burst of
// RefusalLogBurst; a line "suppressed N refusals" counts those left out.
const (
	RefusalLogRate  = 10
	RefusalLogBurst = 50
)

// LogLimiter bounds how many lines of one kind reach a log: refused
// requests, say, which a client without a token can cause as fast as it
// connects. It lets through a burst, then perSecond lines a second; what it
// holds back it counts, and hands the count to report at most once a second
// (report writes "suppressed N refusals", or the like). It is safe for
// concurrent use.
type LogLimiter struct {
	perSecond float64
	burst     float64
	report    func(suppressed int)

	reporting  sync.Mutex // held by Flush from taking the count to reporting it
	mu         sync.Mutex
	tokens     float64
	last       time.Time
	suppressed int
	timer      *time.Timer
}

// NewLogLimiter returns a limiter of perSecond lines a second after a burst
// of burst lines; report, which may be nil, gets the number of lines held
// back, from a goroutine of its own, a second after the first of them.
func NewLogLimiter(perSecond float64, burst int, report func(suppressed int)) *LogLimiter {
	return &LogLimiter{perSecond: perSecond, burst: float64(burst), tokens: float64(burst), report: report}
}

// Allow reports whether one more line may be written now; when not, the
// line is counted as suppressed.
func (l *LogLimiter) Allow() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if !l.last.IsZero() {
		l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.perSecond)
	}
	l.last = now
	if l.tokens >= 1 {
		l.tokens--
		return true
	}
	l.suppressed++
	if l.timer == nil && l.report != nil {
		l.timer = time.AfterFunc(time.Second, l.Flush)
	}
	return false
}

// Flush reports the lines held back so far, if any, now: at shutdown, so
// that the count is not lost. A Flush waits for one under way (the
// timer's), whose count it would otherwise find taken and not yet written.
func (l *LogLimiter) Flush() {
	l.reporting.Lock()
	defer l.reporting.Unlock()
	l.mu.Lock()
	n := l.suppressed
	l.suppressed = 0
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.mu.Unlock()
	if n > 0 && l.report != nil {
		l.report(n)
	}
}
