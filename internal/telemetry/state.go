package telemetry

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/leasekeeper/leasekeeper/internal/engine"
	"github.com/leasekeeper/leasekeeper/service"
)

// readiness holds the gauges of the last readiness verdict: ready (1 or
// 0) and, per reason, whether it is why the server is not ready. Every
// reason the server knows is shown from the start, at 0: an alert on one
// needs its series before the first failure.
type readiness struct {
	mu       sync.Mutex
	ready    prometheus.Gauge
	notReady *prometheus.GaugeVec
	reasons  map[string]bool // every reason shown so far
}

func newReadiness(reg *prometheus.Registry) *readiness {
	r := &readiness{
		ready: prometheus.NewGauge(prometheus.GaugeOpts{Name: "leasekeeper_ready",
			Help: "1 when the server's last readiness verdict (GET /v1/ready) was ready, 0 when not; 1 from the start."}),
		notReady: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "leasekeeper_not_ready",
			Help: "1 for the reason of the last verdict not ready, 0 for the others."}, []string{"reason"}),
		reasons: map[string]bool{},
	}
	reg.MustRegister(r.ready, r.notReady)
	r.ready.Set(1)
	for _, reason := range engine.NotReadyReasons {
		r.reasons[reason] = true
		r.notReady.WithLabelValues(reason).Set(0)
	}
	return r
}

// Ready records a readiness verdict: reason is "" for ready, else why not
// (engine.NotReadyReasons).
func (t *Telemetry) Ready(reason string) {
	r := t.readiness
	r.mu.Lock()
	defer r.mu.Unlock()
	if reason == "" {
		r.ready.Set(1)
	} else {
		r.ready.Set(0)
		r.reasons[reason] = true
	}
	for known := range r.reasons {
		v := 0.0
		if known == reason {
			v = 1
		}
		r.notReady.WithLabelValues(known).Set(v)
	}
}

// databaseGauges are the gauges read from the database at each scrape:
// locks held, clients waiting, the oldest wait, in one read. A read that
// fails shows -1.
type databaseGauges struct{ read Gauges }

var (
	locksHeldDesc = prometheus.NewDesc("leasekeeper_locks_held", "Locks with at least one holder.", nil, nil)
	waitersDesc   = prometheus.NewDesc("leasekeeper_waiters", "Clients waiting in a queue.", nil, nil)
	oldestDesc    = prometheus.NewDesc("leasekeeper_oldest_wait_seconds",
		"How long the client waiting longest in any queue has waited, in whole seconds; 0 when nobody waits.", nil, nil)
)

func (g *databaseGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- locksHeldDesc
	ch <- waitersDesc
	ch <- oldestDesc
}

func (g *databaseGauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := g.read(ctx)
	if err != nil {
		v = service.Gauges{Held: -1, Waiting: -1, OldestWait: -1}
	}
	ch <- prometheus.MustNewConstMetric(locksHeldDesc, prometheus.GaugeValue, float64(v.Held))
	ch <- prometheus.MustNewConstMetric(waitersDesc, prometheus.GaugeValue, float64(v.Waiting))
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, float64(v.OldestWait))
}

// ConnectionsFrom adds the gauges of the HTTP connections: how many are
// open, read through open at each scrape (server.Conns.Open), and the cap,
// max (0 for none).
func (t *Telemetry) ConnectionsFrom(open func() int, max int) {
	t.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasekeeper_connections_open",
			Help: "HTTP connections open, the one of the scrape included."}, func() float64 { return float64(open()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "leasekeeper_connections_max",
			Help: "The cap on open HTTP connections (serve --max-connections); 0 for none."}, func() float64 { return float64(max) }))
}
