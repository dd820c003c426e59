package repo

// The registry of every statement repo runs. A statement is declared once,
// at package level, with portable (one text for both databases) or perDialect
// (the text comes from the dialect, dialect.go); Tx runs only registered
// statements, by their number, so nothing else can reach a database, and
// TestEveryStatementPrepares prepares each one on SQLite and on PostgreSQL.
//
// Texts are written with SQLite's parameters, ? or ?N; Open checks each
// (scanParams) and renders it for its database once (dialect.bind): ?N
// becomes $N on PostgreSQL. The scan refuses what a mechanical rewrite would
// get wrong: a ? inside a string literal, a quoted identifier or a comment,
// bare and numbered parameters in one statement, a gap in the numbers.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// statement is a registered statement: its index in registry, and in a DB's
// texts and prepared statements.
type statement int

type statementDef struct {
	name string
	// text gives the statement for a dialect, "" if that database never
	// runs it.
	text func(dialect) string
}

// registry holds every statement, in the order of declaration. It is
// complete once the package is initialized: declaring one later panics, so
// a statement cannot be put together at run time. A statement that varies
// is registered as each of its finite variants.
var (
	registry       []statementDef
	registryClosed bool
)

func init() { registryClosed = true }

// portable declares a statement whose text, in SQLite's syntax, both
// databases read.
func portable(name, text string) statement {
	return define(name, func(dialect) string { return text })
}

// perDialect declares a statement whose text the dialect gives.
func perDialect(name string, text func(dialect) string) statement {
	return define(name, text)
}

func define(name string, text func(dialect) string) statement {
	if registryClosed {
		panic("repo: statement " + name + " declared after initialization; declare statements at package level")
	}
	for _, def := range registry {
		if def.name == name {
			panic("repo: statement " + name + " declared twice")
		}
	}
	registry = append(registry, statementDef{name: name, text: text})
	return statement(len(registry) - 1)
}

func (s statement) String() string { return registry[s].name }

// render returns the text of every registered statement for d, indexed by
// statement, "" where d has none; it reports every statement that does not
// pass scanParams.
func render(d dialect) ([]string, error) {
	texts := make([]string, len(registry))
	var errs []error
	for i, def := range registry {
		t, err := bind(d, def.text(d))
		if err != nil {
			errs = append(errs, fmt.Errorf("statement %s (%s): %w", def.name, d, err))
		}
		texts[i] = t
	}
	return texts, errors.Join(errs...)
}

// textIn returns s's text for d, for a statement run outside a DB (Backup).
func (s statement) textIn(d dialect) (string, error) {
	t, err := bind(d, registry[s].text(d))
	if err == nil && t == "" {
		err = fmt.Errorf("%s has no statement %s", d, s)
	}
	return t, err
}

// bind checks text's parameters and renders them for d.
func bind(d dialect, text string) (string, error) {
	if text == "" {
		return "", nil
	}
	ps, err := scanParams(text)
	if err != nil {
		return "", err
	}
	return d.bind(text, ps), nil
}

// param is one parameter of a statement's text: text[start:end] is ? or ?N,
// and n its number, counted from 1.
type param struct {
	start, end, n int
}

// scanParams finds the parameters of text and numbers them as SQLite does.
// It knows SQL's lexical forms well enough to refuse a ? that is not a
// parameter, which a rewrite for PostgreSQL would corrupt, and a $, which
// one dialect would read as a parameter and the other as a dollar quote or
// a name.
func scanParams(text string) ([]param, error) {
	var ps []param
	bare, numbered := 0, map[int]bool{}
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '\'' || c == '"':
			what := "string literal"
			if c == '"' {
				what = "quoted identifier"
			}
			end, err := closing(text, i, c, what)
			if err != nil {
				return nil, err
			}
			if c == '\'' && strings.IndexByte(text[i:end], '\\') >= 0 {
				// PostgreSQL's E'...' reads a backslash as an escape, and
				// then the quote that ends the literal is elsewhere.
				return nil, fmt.Errorf("a backslash in the string literal at byte %d", i)
			}
			i = end
		case c == '-' && strings.HasPrefix(text[i:], "--"):
			end := strings.IndexByte(text[i:], '\n')
			if end < 0 {
				end = len(text) - i
			}
			if strings.IndexByte(text[i:i+end], '?') >= 0 {
				return nil, fmt.Errorf("a ? in the comment at byte %d", i)
			}
			i += end
		case c == '/' && strings.HasPrefix(text[i:], "/*"):
			end := strings.Index(text[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("the comment at byte %d does not end", i)
			}
			end += i + 4
			if strings.Contains(text[i+2:end-2], "/*") {
				// PostgreSQL nests comments, SQLite does not.
				return nil, fmt.Errorf("a nested comment at byte %d", i)
			}
			if strings.IndexByte(text[i:end], '?') >= 0 {
				return nil, fmt.Errorf("a ? in the comment at byte %d", i)
			}
			i = end - 1
		case c == '$':
			return nil, fmt.Errorf("a $ at byte %d: write parameters as ? or ?N", i)
		case c == '?':
			j := i + 1
			for j < len(text) && text[j] >= '0' && text[j] <= '9' {
				j++
			}
			p := param{start: i, end: j}
			if j == i+1 {
				bare++
				p.n = bare
			} else {
				n, err := strconv.Atoi(text[i+1 : j])
				if err != nil || n < 1 || n > 999 {
					return nil, fmt.Errorf("parameter %s at byte %d: numbers run from ?1 to ?999", text[i:j], i)
				}
				p.n = n
				numbered[n] = true
			}
			ps = append(ps, p)
			i = j - 1
		}
	}
	if bare > 0 && len(numbered) > 0 {
		// SQLite numbers a bare ? after the largest number before it;
		// keep each statement to one style rather than follow that.
		return nil, errors.New("both ? and ?N parameters: use one style in a statement")
	}
	for n := 1; n <= len(numbered); n++ {
		if !numbered[n] {
			// PostgreSQL cannot type a parameter that is never used.
			return nil, fmt.Errorf("parameters go up to ?%d but ?%d is missing", maxKey(numbered), n)
		}
	}
	return ps, nil
}

// closing returns the index of the quote that closes the one at text[i],
// a doubled quote standing for itself; it refuses a ? inside.
func closing(text string, i int, quote byte, what string) (int, error) {
	for j := i + 1; j < len(text); j++ {
		switch text[j] {
		case '?':
			return 0, fmt.Errorf("a ? inside the %s at byte %d", what, i)
		case quote:
			if j+1 < len(text) && text[j+1] == quote {
				j++
				continue
			}
			return j, nil
		}
	}
	return 0, fmt.Errorf("the %s at byte %d does not end", what, i)
}

func maxKey(m map[int]bool) int {
	top := 0
	for n := range m {
		top = max(top, n)
	}
	return top
}
