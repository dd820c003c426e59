package main

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/leasekeeper/leasekeeper/fence"
)

// splitSQL cuts text into statements at the semicolons outside quotes and
// comments: '...' strings (and MySQL's "..." ones, with backslash escapes),
// "..." and `...` identifiers, -- and /* */ comments (and MySQL's #),
// PostgreSQL's $tag$ ... $tag$ bodies. Statements with nothing but space
// and comments are dropped. A SQLite trigger's BEGIN ... END body is not
// understood: fence sql is for the job's writes, not its schema.
func splitSQL(text string, d fence.Dialect) ([]string, error) {
	var out []string
	start := 0
	i := 0
	flush := func(end int) {
		if strings.TrimSpace(stripComments(text[start:end])) != "" {
			out = append(out, strings.TrimSpace(text[start:end]))
		}
	}
	for i < len(text) {
		c := text[i]
		switch {
		case c == ';':
			flush(i)
			start = i + 1
			i++
		case c == '\'' || c == '"' || c == '`':
			end, err := skipQuoted(text, i, d)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '-' && strings.HasPrefix(text[i:], "--"), c == '#' && d == fence.MySQL:
			nl := strings.IndexByte(text[i:], '\n')
			if nl < 0 {
				i = len(text)
			} else {
				i += nl + 1
			}
		case c == '/' && strings.HasPrefix(text[i:], "/*"):
			end := strings.Index(text[i+2:], "*/")
			if end < 0 {
				return nil, errors.New("a /* comment is not closed")
			}
			i += 2 + end + 2
		case c == '$' && d == fence.Postgres:
			tag, ok := dollarTag(text[i:])
			if !ok {
				i++
				continue
			}
			end := strings.Index(text[i+len(tag):], tag)
			if end < 0 {
				return nil, fmt.Errorf("a %s quoted body is not closed", tag)
			}
			i += len(tag) + end + len(tag)
		default:
			i++
		}
	}
	flush(len(text))
	return out, nil
}

// skipQuoted returns the index after the quoted text that starts at i.
func skipQuoted(text string, i int, d fence.Dialect) (int, error) {
	q := text[i]
	backslash := d == fence.MySQL && q != '`'
	for j := i + 1; j < len(text); j++ {
		switch {
		case backslash && text[j] == '\\':
			j++
		case text[j] == q && j+1 < len(text) && text[j+1] == q:
			j++ // a doubled quote stands for itself
		case text[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("a %c quote is not closed", q)
}

// dollarTag returns the $tag$ that s starts with, if it does.
func dollarTag(s string) (string, bool) {
	for j := 1; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '$':
			return s[:j+1], true
		case c == '_' || unicode.IsLetter(rune(c)) || (j > 1 && c >= '0' && c <= '9'):
		default:
			return "", false
		}
	}
	return "", false
}

// stripComments removes the leading space and comments of s.
func stripComments(s string) string {
	for {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		switch {
		case strings.HasPrefix(s, "--"), strings.HasPrefix(s, "#"):
			nl := strings.IndexByte(s, '\n')
			if nl < 0 {
				return ""
			}
			s = s[nl+1:]
		case strings.HasPrefix(s, "/*"):
			end := strings.Index(s, "*/")
			if end < 0 {
				return ""
			}
			s = s[end+2:]
		default:
			return s
		}
	}
}

// words returns the first n keywords of statement s, upper-cased.
func words(s string, n int) []string {
	var out []string
	s = stripComments(s)
	for len(out) < n {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		end := strings.IndexFunc(s, func(r rune) bool { return !(unicode.IsLetter(r) || r == '_') })
		if end < 0 {
			end = len(s)
		}
		if end == 0 {
			break
		}
		out = append(out, strings.ToUpper(s[:end]))
		s = s[end:]
	}
	return out
}

// Statements that end or change the transaction the check runs in.
var txControl = map[string]bool{
	"BEGIN": true, "START": true, "COMMIT": true, "END": true, "ROLLBACK": true, "ABORT": true,
	"SAVEPOINT": true, "RELEASE": true, "XA": true,
}

// MySQL's statements that commit the transaction implicitly (DDL and its
// kin), which would let the writes after them land without the check.
var mysqlImplicitCommit = map[string]bool{
	"CREATE": true, "ALTER": true, "DROP": true, "TRUNCATE": true, "RENAME": true, "GRANT": true, "REVOKE": true,
	"LOCK": true, "UNLOCK": true, "ANALYZE": true, "OPTIMIZE": true, "REPAIR": true, "CHECK": true, "FLUSH": true,
	"RESET": true, "CACHE": true, "INSTALL": true, "UNINSTALL": true,
}

// refuseStatement refuses what would end the check's transaction.
func refuseStatement(s string, d fence.Dialect) error {
	w := words(s, 3)
	if len(w) == 0 {
		return nil
	}
	refuse := func(why string) error {
		return fmt.Errorf("refused %s: %s (nothing was run)", strings.Join(w[:1], " "), why)
	}
	switch {
	case txControl[w[0]]:
		return refuse("fence sql runs the statements in a transaction of its own, which the check must end")
	case w[0] == "PREPARE" && len(w) > 1 && w[1] == "TRANSACTION":
		return refuse("fence sql runs the statements in a transaction of its own, which the check must end")
	case d == fence.MySQL && mysqlImplicitCommit[w[0]]:
		return refuse("on MySQL/MariaDB it commits the transaction implicitly, ending the check's hold")
	case d == fence.MySQL && w[0] == "LOAD" && len(w) > 1 && w[1] == "INDEX":
		return refuse("on MySQL/MariaDB it commits the transaction implicitly, ending the check's hold")
	case d == fence.MySQL && w[0] == "SET" && strings.Contains(strings.ToUpper(s), "AUTOCOMMIT"):
		return refuse("autocommit would commit the transaction, ending the check's hold")
	}
	return nil
}
