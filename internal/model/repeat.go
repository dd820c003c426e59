package model

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
)

// repeat is ["repeat", ts, template, count, step] or ["repeat", ts, count,
// step, template] (docs/contract.md section 5, contract-notes "repeat"). Whole-repeat
// problems are one "error: invalid arguments" (time has already advanced to
// ts); each run is a full operation at ts + i*step whose result, errors
// included, is tallied.
func (m *Model) repeat(ts int64, args []any) any {
	if len(args) != 3 {
		return errInvalidArguments
	}
	// The form is chosen by where the one array is: third element first.
	var tmplArg, countArg, stepArg any
	if _, ok := args[0].([]any); ok {
		tmplArg, countArg, stepArg = args[0], args[1], args[2]
	} else if _, ok := args[2].([]any); ok {
		countArg, stepArg, tmplArg = args[0], args[1], args[2]
	} else {
		return errInvalidArguments
	}

	count, ok := asInteger(countArg)
	if !ok || count < 1 || count > 100000 {
		return errInvalidArguments
	}
	step, ok := asInteger(stepArg)
	if !ok || step < 0 {
		return errInvalidArguments
	}
	// The last run's ts must be representable (contract-notes).
	last := new(big.Int).Mul(big.NewInt(count-1), big.NewInt(step))
	last.Add(last, big.NewInt(ts))
	if !last.IsInt64() {
		return errInvalidArguments
	}

	tmpl := tmplArg.([]any)
	if len(tmpl) == 0 {
		return errInvalidArguments
	}
	name, ok := tmpl[0].(string)
	if !ok || !isOperationName(name) || name == opRepeat {
		return errInvalidArguments
	}
	for _, a := range tmpl[1:] {
		if s, ok := a.(string); ok && !placeholdersValid(s) {
			return errInvalidArguments
		}
	}

	tally := map[string]int64{}
	abortedBefore := m.aborted
	for i := range count {
		op := make([]any, 0, len(tmpl)+1)
		// ts+i*step lies between ts and the last run's ts, so it fits; int64
		// arithmetic wraps modulo 2^64, which yields it exactly even when
		// i*step alone would not fit (ts negative).
		op = append(op, name, json.Number(strconv.FormatInt(ts+i*step, 10)))
		for _, a := range tmpl[1:] {
			if s, ok := a.(string); ok {
				a = substitute(s, i)
			}
			op = append(op, a)
		}
		tally[tallyKey(m.exec(op))]++
	}
	if n := m.aborted - abortedBefore; n > 0 {
		// A run whose string result is literally "aborted" shares the key;
		// the counts add up.
		tally["aborted"] += n
	}
	return map[string]any{"ops": count, "results": tally}
}

// tallyKey is where a run's result counts (docs/contract.md section 5): a string under
// itself, an array under its first element, anything else under "other".
func tallyKey(result any) string {
	switch r := result.(type) {
	case string:
		return r
	case []any:
		if s, ok := r[0].(string); ok {
			return s
		}
	}
	return "other"
}

// placeholder is one recognised {i}, {i+A}, {i%K} or {i+A%K}.
type placeholder struct {
	length int // bytes from '{' to '}' inclusive
	hasA   bool
	hasK   bool
	a, k   int64
	fits   bool // A and K fit in a signed 64-bit integer
}

// parsePlaceholder reads a placeholder at s[start] == '{'. A and K are one or
// more ASCII decimal digits, leading zeros allowed; anything else in braces is
// not a placeholder (ok false).
func parsePlaceholder(s string, start int) (p placeholder, ok bool) {
	j := start + 1
	if !strings.HasPrefix(s[j:], "i") {
		return p, false
	}
	j++
	digits := func() (string, bool) {
		k := j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		d := s[j:k]
		j = k
		return d, d != ""
	}
	p.fits = true
	if j < len(s) && s[j] == '+' {
		j++
		d, ok := digits()
		if !ok {
			return p, false
		}
		p.hasA = true
		var err error
		if p.a, err = strconv.ParseInt(d, 10, 64); err != nil {
			p.fits = false
		}
	}
	if j < len(s) && s[j] == '%' {
		j++
		d, ok := digits()
		if !ok {
			return p, false
		}
		p.hasK = true
		var err error
		if p.k, err = strconv.ParseInt(d, 10, 64); err != nil {
			p.fits = false
		}
	}
	if j >= len(s) || s[j] != '}' {
		return p, false
	}
	p.length = j + 1 - start
	return p, true
}

// placeholdersValid is the whole-repeat check on one string argument: no
// placeholder with K = 0 and none whose A or K does not fit in an int64. It
// scans exactly as substitute does.
func placeholdersValid(s string) bool {
	for j := 0; j < len(s); {
		if s[j] == '{' {
			if p, ok := parsePlaceholder(s, j); ok {
				if !p.fits || (p.hasK && p.k == 0) {
					return false
				}
				j += p.length
				continue
			}
		}
		j++
	}
	return true
}

// substitute replaces the placeholders of s for run i in one left-to-right
// pass; replaced text is not scanned again. i + A is computed in uint64, which
// holds any int64 A plus i < 100000, so neither {i+A} nor (i+A) % K overflows.
func substitute(s string, i int64) string {
	if !strings.Contains(s, "{i") {
		return s
	}
	var b strings.Builder
	for j := 0; j < len(s); {
		if s[j] == '{' {
			if p, ok := parsePlaceholder(s, j); ok {
				v := uint64(i)
				if p.hasA {
					v += uint64(p.a)
				}
				if p.hasK {
					v %= uint64(p.k)
				}
				b.WriteString(strconv.FormatUint(v, 10))
				j += p.length
				continue
			}
		}
		b.WriteByte(s[j])
		j++
	}
	return b.String()
}
