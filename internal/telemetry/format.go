package telemetry

import (
	"encoding/json"
	"io"
	"log/slog"
	"reflect"
)

// Format is how the audit lines are written.
type Format int

const (
	// JSON lines, one object a line (docs/observability.md): the
	// default, and what Recover reads back from an --audit-log file.
	JSON Format = iota
	// Text is slog's key=value lines, for a standard error whose other
	// lines are text too (serve --log-format text). A value that is a
	// list or an object (a deadlock abort's lost and cycle) is written as
	// JSON in a quoted string, so that the line still parses.
	Text
)

// handler returns the slog handler that writes format's lines to w.
func (f Format) handler(w io.Writer) slog.Handler {
	if f == Text {
		return slog.NewTextHandler(w, f.options())
	}
	return slog.NewJSONHandler(w, f.options())
}

// options are those of format's slog handler, kept here, apart from
// handler, so that direct sees whatever the JSON handler is given.
func (f Format) options() *slog.HandlerOptions {
	if f == Text {
		return &slog.HandlerOptions{ReplaceAttr: jsonValues}
	}
	return nil
}

// direct reports whether Audit may encode format's lines by hand
// (appendLine, encode.go). appendLine writes what slog's JSON handler
// writes with its default options: given a ReplaceAttr, a level, or
// AddSource, the handler would write other lines, and Audit leaves them
// all to it.
func (f Format) direct() bool {
	return f == JSON && f.options() == nil
}

// jsonValues writes an attribute whose value is a list, a map or a struct
// as JSON: slog's text handler would write it with fmt's %+v, Go's syntax,
// which no log reader parses.
func jsonValues(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindAny {
		return a
	}
	switch reflect.ValueOf(a.Value.Any()).Kind() {
	case reflect.Slice, reflect.Array, reflect.Map, reflect.Struct:
	default:
		return a // the level, say: a number that prints itself
	}
	b, err := json.Marshal(a.Value.Any())
	if err != nil {
		return a
	}
	return slog.String(a.Key, string(b))
}
