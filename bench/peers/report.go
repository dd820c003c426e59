package main

import (
	"fmt"
	"io"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"
)

// report is a run's results and how they were measured.
type report struct {
	cfg       config
	loads     []load
	variants  []variant
	results   [][][]*cellResult // [variant][load][round]
	about     []string
	loadStart [3]float64
	loadEnd   [3]float64
}

// write prints the run as markdown: how it was measured, the medians of
// pairs/s with the ratios, the medians of the latencies, the safety check,
// then every cell, so that the medians can be checked against their rounds.
func (r *report) write(w io.Writer) {
	of := "median of " + strconv.Itoa(r.cfg.rounds) + " rounds"
	if r.cfg.rounds == 1 {
		of = "one round"
	}
	fmt.Fprintf(w, "bench/peers: %s, %v per row after %v of warm-up; each row on every system in turn, the order turning each round; "+
		"each system started anew on an empty store for each row; loopback only\n\n", of, r.cfg.duration, r.cfg.warmup)
	between := "with nothing done in between"
	if r.cfg.hold > 0 {
		between = fmt.Sprintf("holding it %v in between (--hold)", r.cfg.hold)
	}
	fmt.Fprintf(w, "- load: each client loops pairs, a blocking acquire and a release of one name, %s; "+
		"light contention (the columns by number of clients): %d names per client, %d × clients in all, each pair taking one at random; "+
		"hot lock: every client on one name\n", between, namesPerClient, namesPerClient)
	fmt.Fprintf(w, "- machine: %s; load average %s at the start, %s at the end; %s\n", cpus(), loads(r.loadStart), loads(r.loadEnd), r.cpuShares())
	for _, a := range r.about {
		fmt.Fprintf(w, "- %s\n", a)
	}

	fmt.Fprintf(w, "\n| pairs/s, %s |", of)
	r.headings(w)
	for v := range r.variants {
		r.row(w, r.variants[v].label, func(l int) string { return thousands(r.median(v, l, (*cellResult).rate)) })
	}
	for _, ratio := range r.ratios() {
		r.row(w, ratio.label, func(l int) string {
			return fmt.Sprintf("%.2fx", r.median(ratio.num, l, (*cellResult).rate)/r.median(ratio.den, l, (*cellResult).rate))
		})
	}

	if r.cfg.rounds > 1 && r.hasOld() {
		r.newOld(w, "round by round: median (lowest to highest)", func(xs []float64) string {
			return fmt.Sprintf("%.2fx (%.2f to %.2f)", median(xs), slices.Min(xs), slices.Max(xs))
		}, r.byRound)
		fmt.Fprintln(w, "\nEach round's ratio compares two systems measured minutes apart in the same round; their median is less moved by a slow spell of the machine than the ratio of the medians above.")
		if r.stealKnown() {
			r.newOld(w, "in calm rounds (neither run had "+percent(calmSteal)+" % or more of the CPUs' time stolen): median (how many rounds)",
				func(xs []float64) string {
					if len(xs) == 0 {
						return "- (0)"
					}
					return fmt.Sprintf("%.2fx (%d)", median(xs), len(xs))
				}, r.calmRounds)
		}
	}

	fmt.Fprintf(w, "\n| p50 / p99 of a pair, ms, %s |", of)
	r.headings(w)
	for v := range r.variants {
		r.row(w, r.variants[v].label, func(l int) string {
			p50 := r.median(v, l, func(c *cellResult) float64 { return millis(c.percentile(50)) })
			p99 := r.median(v, l, func(c *cellResult) float64 { return millis(c.percentile(99)) })
			return fmt.Sprintf("%.2f / %.2f", p50, p99)
		})
	}

	if r.counted() {
		fmt.Fprintf(w, "\n| operations per group / round trips per operation, %s, from the servers' /metrics |", of)
		r.headings(w)
		for v := range r.variants {
			if r.variants[v].backend == sysEtcd {
				continue
			}
			r.row(w, r.variants[v].label, func(l int) string {
				return perGroup(r.medianKnown(v, l, (*cellResult).opsPerGroup)) + " / " + perOp(r.medianKnown(v, l, (*cellResult).roundTripsPerOp))
			})
		}
		fmt.Fprintln(w, "\nRound trips are the committer's to PostgreSQL, a pipelined batch counted once; 0 on SQLite. \"-\": a build without the counters (the build before issue 19 counts no round trip; its operations per group come from its histogram of them).")
	}

	if r.cpuTimed() {
		fmt.Fprintf(w, "\n| server CPU per pair / committer per operation, µs, %s |", of)
		r.headings(w)
		for v := range r.variants {
			r.row(w, r.variants[v].label, func(l int) string {
				return micros(r.medianKnown(v, l, (*cellResult).cpuPerPair)) + " / " + micros(r.medianKnown(v, l, (*cellResult).committerPerOp))
			})
		}
		fmt.Fprintln(w, "\nServer CPU is the user and system time of the system's server processes in the measured part, over its pairs: etcd's; a leasekeeper fleet's servers, added up, and on PostgreSQL the throwaway cluster's processes with them (unknown with --postgres); the committer's time is wall-clock time, leasekeeper_commit_duration_seconds' sum over the operations: its groups' statements and their sync or round trips. \"-\": unknown (no /proc, the PostgreSQL not found, a server that stopped in the cell).")
	}

	holds, errs, violations := r.totals()
	fmt.Fprintln(w)
	if len(violations) == 0 {
		fmt.Fprintf(w, "Safety: %s holds checked; no name was ever held by two clients at once, and each name's tokens rose with every grant.\n", thousands(float64(holds)))
	} else {
		fmt.Fprintf(w, "Safety: %s holds checked; VIOLATED:\n", thousands(float64(holds)))
		for _, v := range violations {
			fmt.Fprintf(w, "- %s\n", v)
		}
	}
	if errs > 0 {
		fmt.Fprintf(w, "Errors: %d pairs failed (the table of every run below says where; the messages went to standard error).\n", errs)
	}

	fmt.Fprintln(w, "\nEvery run, in the order run:")
	fmt.Fprintln(w, "\n| round | row | system | pairs/s | p50 ms | p99 ms | errors | holds checked | load average at its start | operations per group | round trips per operation | server CPU µs per pair | committer µs per operation | CPU busy % | CPU stolen % |")
	fmt.Fprintln(w, "|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for round := range r.cfg.rounds {
		for l, ld := range r.loads {
			for _, v := range turn(len(r.variants), round) {
				c := r.results[v][l][round]
				fmt.Fprintf(w, "| %d | %s | %s | %.0f | %s | %s | %d | %d | %.2f | %s | %s | %s | %s | %s | %s |\n", round+1, ld, r.variants[v].label,
					c.rate(), ms(c.percentile(50)), ms(c.percentile(99)), c.errors, c.holds, c.load1,
					perGroup(c.opsPerGroup()), perOp(c.roundTripsPerOp()), micros(c.cpuPerPair()), micros(c.committerPerOp()),
					percent(c.busy), percent(c.stolen))
			}
		}
	}
}

// newOld writes a table of each new / old ratio: show of its values in
// the rounds of each load that rounds picks.
func (r *report) newOld(w io.Writer, title string, show func([]float64) string, rounds func(ratio, int) []float64) {
	fmt.Fprintf(w, "\n| new / old, %s |", title)
	r.headings(w)
	for _, ratio := range r.ratios() {
		if r.variants[ratio.den].old {
			r.row(w, r.variants[ratio.num].short, func(l int) string { return show(rounds(ratio, l)) })
		}
	}
}

// byRound is ratio's value in each round of load l: the two systems'
// pairs per second in the same round.
func (r *report) byRound(ratio ratio, l int) []float64 {
	return r.roundRatios(ratio, l, func(_, _ *cellResult) bool { return true })
}

// calmSteal is the share of the CPUs' time given by the hypervisor to
// other machines during a run from which on it does not count as calm.
const calmSteal = 0.05

// calmRounds is ratio's value in the rounds of load l in which neither of
// its two runs had calmSteal or more of the CPUs' time stolen.
func (r *report) calmRounds(ratio ratio, l int) []float64 {
	calm := func(c *cellResult) bool { return c.stolen >= 0 && c.stolen < calmSteal }
	return r.roundRatios(ratio, l, func(num, den *cellResult) bool { return calm(num) && calm(den) })
}

// roundRatios is ratio's value in the rounds of load l whose two runs
// keep accepts.
func (r *report) roundRatios(ratio ratio, l int, keep func(num, den *cellResult) bool) []float64 {
	var xs []float64
	for round, c := range r.results[ratio.num][l] {
		if d := r.results[ratio.den][l][round]; keep(c, d) {
			xs = append(xs, c.rate()/d.rate())
		}
	}
	return xs
}

// stealKnown reports whether any run knows its stolen share.
func (r *report) stealKnown() bool {
	for c := range r.cells() {
		if c.stolen >= 0 {
			return true
		}
	}
	return false
}

// cells yields every run's result.
func (r *report) cells() iter.Seq[*cellResult] {
	return func(yield func(*cellResult) bool) {
		for _, byLoad := range r.results {
			for _, rounds := range byLoad {
				for _, c := range rounds {
					if !yield(c) {
						return
					}
				}
			}
		}
	}
}

func (r *report) hasOld() bool {
	return slices.ContainsFunc(r.variants, func(v variant) bool { return v.old })
}

// cpuShares tells what the machine's CPUs did in the measured parts of the
// cells: how busy they were (this run's own systems and clients included),
// and how much of their time the hypervisor gave to other machines, which
// slows every system of a round at once.
func (r *report) cpuShares() string {
	var busy, stolen []float64
	for c := range r.cells() {
		if c.busy >= 0 {
			busy, stolen = append(busy, c.busy), append(stolen, c.stolen)
		}
	}
	if len(busy) == 0 {
		return "CPU use unknown (no /proc/stat)"
	}
	return fmt.Sprintf("in the measured parts the CPUs were busy %s %% of the time (median of the cells; %s to %s) and stolen by the hypervisor %s %% (median; at most %s %%)",
		percent(median(busy)), percent(slices.Min(busy)), percent(slices.Max(busy)), percent(median(stolen)), percent(slices.Max(stolen)))
}

// counted reports whether any cell has the servers' counts.
func (r *report) counted() bool {
	for c := range r.cells() {
		if c.counts != nil && c.counts.ops() > 0 {
			return true
		}
	}
	return false
}

// cpuTimed reports whether any cell knows its servers' CPU time.
func (r *report) cpuTimed() bool {
	for c := range r.cells() {
		if c.serverCPU >= 0 {
			return true
		}
	}
	return false
}

// micros writes µs to the unit, "-" where unknown (negative).
func micros(x float64) string {
	if x < 0 {
		return "-"
	}
	return strconv.FormatFloat(x, 'f', 0, 64)
}

// perGroup and perOp write a ratio of the counts, "-" where there were none
// (negative).
func perGroup(x float64) string {
	if x < 0 {
		return "-"
	}
	return strconv.FormatFloat(x, 'f', 1, 64)
}

func perOp(x float64) string {
	if x < 0 {
		return "-"
	}
	return strconv.FormatFloat(x, 'f', 3, 64)
}

func (r *report) headings(w io.Writer) {
	for _, l := range r.loads {
		fmt.Fprintf(w, " %s |", l)
	}
	fmt.Fprint(w, "\n|---|")
	fmt.Fprint(w, strings.Repeat("--:|", len(r.loads)))
	fmt.Fprintln(w)
}

func (r *report) row(w io.Writer, label string, cell func(load int) string) {
	fmt.Fprintf(w, "| %s |", label)
	for l := range r.loads {
		fmt.Fprintf(w, " %s |", cell(l))
	}
	fmt.Fprintln(w)
}

// median is the median over the rounds of f of variant v's cells of load l.
func (r *report) median(v, l int, f func(*cellResult) float64) float64 {
	var xs []float64
	for _, c := range r.results[v][l] {
		xs = append(xs, f(c))
	}
	return median(xs)
}

// medianKnown is median's figure over the cells in which f is known (not
// negative), -1 in none.
func (r *report) medianKnown(v, l int, f func(*cellResult) float64) float64 {
	var xs []float64
	for _, c := range r.results[v][l] {
		if x := f(c); x >= 0 {
			xs = append(xs, x)
		}
	}
	if len(xs) == 0 {
		return -1
	}
	return median(xs)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

type ratio struct {
	label    string
	num, den int // variants
}

// ratios are each leasekeeper variant to etcd, then each new build to the
// old one on the same backend.
func (r *report) ratios() []ratio {
	var out []ratio
	etcd := slices.IndexFunc(r.variants, func(v variant) bool { return v.backend == sysEtcd })
	if etcd >= 0 {
		for i, v := range r.variants {
			if i != etcd {
				out = append(out, ratio{label: "ratio, " + v.short + " / etcd", num: i, den: etcd})
			}
		}
	}
	for i, v := range r.variants {
		if v.old || v.backend == sysEtcd {
			continue
		}
		if j := slices.IndexFunc(r.variants, func(o variant) bool { return o.old && o.backend == v.backend }); j >= 0 {
			out = append(out, ratio{label: "ratio, " + v.short + ", new / old", num: i, den: j})
		}
	}
	return out
}

// totals adds up the holds checked, the failed pairs and the violations of
// every cell, each violation named by its cell.
func (r *report) totals() (holds, errs int, violations []string) {
	for v, byLoad := range r.results {
		for l, rounds := range byLoad {
			for round, c := range rounds {
				holds += c.holds
				errs += c.errors
				for _, s := range c.violations {
					violations = append(violations, fmt.Sprintf("round %d, %s, %s: %s", round+1, r.loads[l], r.variants[v].label, s))
				}
			}
		}
	}
	return holds, errs, violations
}

// verdict fails a run in which a name was held twice at once, a token went
// backwards, or a pair failed.
func (r *report) verdict() error {
	_, errs, violations := r.totals()
	switch {
	case len(violations) > 0:
		return fmt.Errorf("the safety check failed: %d violations (above)", len(violations))
	case errs > 0:
		return fmt.Errorf("%d pairs failed (their errors went to standard error)", errs)
	}
	return nil
}

func loads(avg [3]float64) string {
	if avg[0] < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.2f %.2f %.2f", avg[0], avg[1], avg[2])
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ms(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return strconv.FormatFloat(millis(d), 'f', 2, 64)
}

// thousands writes x rounded, with commas between thousands: 12,345.
func thousands(x float64) string {
	s := strconv.FormatFloat(x, 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}
