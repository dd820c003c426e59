package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzFlatObject: whatever the bytes, an object flatObject reads is what
// encoding/json's decoder with UseNumber reads from them, and nothing
// follows it; flatObject may give up on any body, never read one
// differently.
func FuzzFlatObject(f *testing.F) {
	for _, s := range []string{
		`{"client":"c0","lock":"bench-0","ttl":30}`, `{"client": "a", "lock": "L", "ttl": 10, "mode": "shared"}`,
		` { } `, `{}`, `{"a":1,"a":"x"}`, `{"a":-0}`, `{"a":01}`, `{"a":1.5}`, `{"a":1e3}`, `{"a":-}`,
		`{"a":1}}`, `{"a":1} {}`, `{"a":1,}`, `{"a":"\u0041"}`, "{\"a\":\"\xff\"}", `{"a":true}`, `null`,
		"{\"a\"\t:\r\n\"b\"}", `{"a":"b"`, `{"a"}`, `{"a":99999999999999999999999}`, `[{"a":1}]`,
		`{"a":+1}`, "{\"a\":\v1}", "{\"a\":\f1}", "\xef\xbb\xbf{}", `{"a":1}}`, `{"a":1}]`, `{}{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, ok := flatObject(raw)
		if !ok {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var want map[string]any
		if err := dec.Decode(&want); err != nil || want == nil || dec.More() {
			t.Fatalf("%q: flatObject read %v; encoding/json: %v (%v, more %v)", raw, m, want, err, dec.More())
		}
		if !reflect.DeepEqual(m, want) {
			t.Fatalf("%q: flatObject read %#v, encoding/json %#v", raw, m, want)
		}
	})
}
