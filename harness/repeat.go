package harness

import (
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// MaxRepeat is the largest count a repeat accepts (docs/contract.md section 5).
const MaxRepeat = 100000

// repeat runs a template count times, run i at ts + i*step, and tallies the
// results (section 5). a holds the elements after ts: template, count, step,
// or count, step, template.
func (r *runner) repeat(ts int64, a []any) (any, error) {
	tmpl, ok := a[0].([]any)
	countV, stepV := a[1], a[2]
	if !ok {
		if tmpl, ok = a[2].([]any); !ok {
			return r.invalid(ts)
		}
		countV, stepV = a[0], a[1]
	}
	count, ok1 := Integer(countV)
	step, ok2 := Integer(stepV)
	if !ok1 || !ok2 || count < 1 || count > MaxRepeat || step < 0 {
		return r.invalid(ts)
	}
	if !lastRunFits(ts, count, step) {
		return r.invalid(ts)
	}
	if len(tmpl) == 0 {
		return r.invalid(ts)
	}
	opName, _ := tmpl[0].(string)
	if _, known := arity[opName]; !known || opName == "repeat" {
		return r.invalid(ts)
	}
	args := make([]any, len(tmpl)-1)
	var patterns []*pattern // nil where the argument is used as it is
	for i, v := range tmpl[1:] {
		args[i] = v
		s, isString := v.(string)
		if !isString {
			continue
		}
		p, ok := compile(s)
		if !ok {
			return r.invalid(ts)
		}
		if p != nil {
			if patterns == nil {
				patterns = make([]*pattern, len(args))
			}
			patterns[i] = p
		}
	}
	tally := map[string]any{}
	counts := map[string]int64{}
	var aborted int64
	op := make([]any, len(tmpl)+1)
	op[0] = opName
	for i := int64(0); i < count; i++ {
		op[1] = ts + i*step
		for j, v := range args {
			if patterns != nil && patterns[j] != nil {
				v = patterns[j].expand(i)
			}
			op[j+2] = v
		}
		res, err := r.exec(op)
		if err != nil {
			return nil, err
		}
		key := "other"
		switch v := res.(type) {
		case string:
			key = v
		case []any:
			key, _ = v[0].(string)
			if vs, ok := v[len(v)-1].([]any); ok && len(v) >= 2 {
				aborted += int64(len(vs))
			}
		}
		counts[key]++
	}
	// A run whose result is the string "aborted" (a read) and the victims
	// share the key: the counts add up (docs/contract.md).
	counts["aborted"] += aborted
	for k, n := range counts {
		if n > 0 {
			tally[k] = n
		}
	}
	return map[string]any{"ops": count, "results": tally}, nil
}

// lastRunFits reports whether ts + (count-1)*step fits in an int64, as the
// last run's ts must (docs/contract.md). count >= 1 and step >= 0.
func lastRunFits(ts, count, step int64) bool {
	hi, span := bits.Mul64(uint64(count-1), uint64(step))
	if hi != 0 || span > math.MaxInt64 {
		return false
	}
	return ts <= 0 || int64(span) <= math.MaxInt64-ts
}

// pattern is a template string split into literal text and placeholders.
type pattern struct {
	parts []part
}

type part struct {
	lit  string
	hole bool
	add  int64 // {i+A}
	mod  int64 // {i%K}; 0 when absent
}

// compile parses the placeholders {i}, {i+A}, {i%K} and {i+A%K} of s. It
// returns nil when s has none, and ok=false for a placeholder that makes the
// whole repeat invalid: K = 0, or A or K beyond an int64.
func compile(s string) (p *pattern, ok bool) {
	if !strings.Contains(s, "{i") {
		return nil, true
	}
	var parts []part
	lit := 0 // start of the pending literal text
	for i := 0; i < len(s); i++ {
		if s[i] != '{' {
			continue
		}
		ph, n, valid, matched := placeholder(s[i:])
		if !matched {
			continue
		}
		if !valid {
			return nil, false
		}
		if lit < i {
			parts = append(parts, part{lit: s[lit:i]})
		}
		parts = append(parts, ph)
		i += n - 1
		lit = i + 1
	}
	if parts == nil {
		return nil, true
	}
	if lit < len(s) {
		parts = append(parts, part{lit: s[lit:]})
	}
	return &pattern{parts: parts}, true
}

// placeholder matches one placeholder at the start of s ("{i" ...). matched
// tells whether s starts with one; n is its length; valid is false for K = 0
// or a number that does not fit in an int64.
func placeholder(s string) (ph part, n int, valid, matched bool) {
	if !strings.HasPrefix(s, "{i") {
		return part{}, 0, false, false
	}
	j := 2
	digits := func() (int64, bool, bool) { // value, present, fits
		k := j
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == k {
			return 0, false, true
		}
		v, err := strconv.ParseInt(s[k:j], 10, 64)
		return v, true, err == nil
	}
	fits := true
	if j < len(s) && s[j] == '+' {
		j++
		v, present, ok := digits()
		if !present {
			return part{}, 0, false, false
		}
		ph.add, fits = v, fits && ok
	}
	hasMod := false
	if j < len(s) && s[j] == '%' {
		j++
		v, present, ok := digits()
		if !present {
			return part{}, 0, false, false
		}
		ph.mod, fits, hasMod = v, fits && ok, true
	}
	if j >= len(s) || s[j] != '}' {
		return part{}, 0, false, false
	}
	ph.hole = true
	return ph, j + 1, fits && !(hasMod && ph.mod == 0), true
}

// expand renders the pattern for run i. (i+A) is computed in uint64: both are
// below 2^63, so the sum cannot wrap.
func (p *pattern) expand(i int64) string {
	var b strings.Builder
	for _, pt := range p.parts {
		if !pt.hole {
			b.WriteString(pt.lit)
			continue
		}
		v := uint64(i) + uint64(pt.add)
		if pt.mod > 0 {
			v %= uint64(pt.mod)
		}
		b.WriteString(strconv.FormatUint(v, 10))
	}
	return b.String()
}
