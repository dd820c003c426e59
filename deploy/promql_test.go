package deploy_test

import (
	"fmt"
	"regexp"
	"strings"
)

// selector is a series selector of a PromQL expression: a metric name and
// its label matchers.
type selector struct {
	name     string
	matchers []matcher
}

type matcher struct{ label, op, value string }

func (s selector) String() string {
	var m []string
	for _, x := range s.matchers {
		m = append(m, fmt.Sprintf("%s%s%q", x.label, x.op, x.value))
	}
	return s.name + "{" + strings.Join(m, ", ") + "}"
}

// promqlWords are the identifiers of PromQL that name no series:
// aggregations (followed by "by (...)" rather than "("), the binary
// operators and the modifiers.
var promqlWords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true,
}

// labelLists are the words followed by a list of label names in
// parentheses.
var labelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

var identRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`)

// selectors returns the series selectors of a PromQL expression, as far
// as the alerts and panels of deploy/ need: it reads metric names and
// their matchers, and skips functions, aggregations, label lists, ranges,
// numbers, strings and Grafana's $variables. It fails on what it does not
// understand rather than miss a name.
func selectors(expr string) ([]selector, error) {
	var out []selector
	depth := 0
	s := expr
	for len(s) > 0 {
		c := s[0]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			s = s[1:]
		case c == '#': // a comment, to the end of the line
			if i := strings.IndexByte(s, '\n'); i >= 0 {
				s = s[i:]
			} else {
				s = ""
			}
		case c == '[': // a range or subquery: durations and $__rate_interval
			i := strings.IndexByte(s, ']')
			if i < 0 {
				return nil, fmt.Errorf("unclosed [ in %q", expr)
			}
			s = s[i+1:]
		case c == '"' || c == '\'' || c == '`':
			_, rest, err := quoted(s)
			if err != nil {
				return nil, fmt.Errorf("%v in %q", err, expr)
			}
			s = rest
		case c == '$': // a Grafana variable
			s = s[1:]
			s = s[len(identRE.FindString(s)):]
		case c >= '0' && c <= '9' || c == '.':
			i := 1
			for i < len(s) && (isAlnum(s[i]) || s[i] == '.' || (s[i] == '+' || s[i] == '-') && (s[i-1] == 'e' || s[i-1] == 'E')) {
				i++
			}
			s = s[i:]
		case c == '{': // a selector without a name before its braces
			ms, rest, err := matchers(s)
			if err != nil {
				return nil, fmt.Errorf("%v in %q", err, expr)
			}
			sel := selector{matchers: ms}
			for _, m := range ms {
				if m.label == "__name__" && m.op == "=" {
					sel.name = m.value
				}
			}
			if sel.name == "" {
				return nil, fmt.Errorf("a selector without a metric name in %q", expr)
			}
			out = append(out, sel)
			s = rest
		case identRE.MatchString(s):
			word := identRE.FindString(s)
			s = s[len(word):]
			next := strings.TrimLeft(s, " \t\n\r")
			switch {
			case labelLists[strings.ToLower(word)]:
				if !strings.HasPrefix(next, "(") {
					return nil, fmt.Errorf("%s without its label list in %q", word, expr)
				}
				i := strings.IndexByte(next, ')')
				if i < 0 {
					return nil, fmt.Errorf("unclosed label list in %q", expr)
				}
				s = next[i+1:]
			case promqlWords[strings.ToLower(word)]:
			case strings.HasPrefix(next, "("): // a function
			default:
				sel := selector{name: word}
				if strings.HasPrefix(next, "{") {
					ms, rest, err := matchers(next)
					if err != nil {
						return nil, fmt.Errorf("%v in %q", err, expr)
					}
					sel.matchers, s = ms, rest
				}
				out = append(out, sel)
			}
		case c == '(' || c == ')':
			if c == '(' {
				depth++
			} else if depth--; depth < 0 {
				return nil, fmt.Errorf("unbalanced ) in %q", expr)
			}
			s = s[1:]
		case strings.ContainsRune("+-*/%^=!<>,@", rune(c)):
			s = s[1:]
		default:
			return nil, fmt.Errorf("unexpected %q in %q", c, expr)
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced ( in %q", expr)
	}
	return out, nil
}

// matchers reads a {...} of label matchers at the start of s.
func matchers(s string) ([]matcher, string, error) {
	s = s[1:]
	var out []matcher
	for {
		s = strings.TrimLeft(s, " \t\n\r,")
		if strings.HasPrefix(s, "}") {
			return out, s[1:], nil
		}
		label := identRE.FindString(s)
		if label == "" {
			return nil, "", fmt.Errorf("a label name expected at %q", s)
		}
		s = strings.TrimLeft(s[len(label):], " \t")
		var op string
		for _, o := range []string{"=~", "!~", "!=", "="} {
			if strings.HasPrefix(s, o) {
				op = o
				break
			}
		}
		if op == "" {
			return nil, "", fmt.Errorf("a matcher's operator expected at %q", s)
		}
		value, rest, err := quoted(strings.TrimLeft(s[len(op):], " \t"))
		if err != nil {
			return nil, "", err
		}
		out = append(out, matcher{label, op, value})
		s = rest
	}
}

// quoted reads a PromQL string at the start of s.
func quoted(s string) (value, rest string, err error) {
	if s == "" || !strings.ContainsRune("\"'`", rune(s[0])) {
		return "", "", fmt.Errorf("a string expected at %q", s)
	}
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == q:
			return b.String(), s[i+1:], nil
		case s[i] == '\\' && q != '`' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", fmt.Errorf("an unclosed string at %q", s)
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}
