package jsonenc

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
)

// FuzzString holds String to encoding/json's bytes (HTML escaping off) and
// SlogString to log/slog's JSON handler's, for any string.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "plain", "a\"b\\c\b\f\n\r\t\x00\x1f\x7f", "<a&b>", "\xff\xfe\u2028\u2029é漢\U0001F600", "x\xe2\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got := String(nil, s); !bytes.Equal(append(got, '\n'), want.Bytes()) {
			t.Fatalf("String(%q) = %s, encoding/json %s", s, got, want.Bytes())
		}
		want.Reset()
		h := slog.NewJSONHandler(&want, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == slog.LevelKey {
				return slog.Attr{}
			}
			return a
		}})
		slog.New(h).Info("", "k", s)
		got := append(SlogString([]byte(`{"msg":"","k":`), s), "}\n"...)
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("SlogString(%q): %s, slog %s", s, got, want.Bytes())
		}
	})
}
