package auth

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// Role is what a principal may do (see Allowed).
type Role string

// The roles of an auth file.
const (
	// RoleClient: a job. It acquires, renews, releases and asks the status
	// of the client ids its patterns match, and writes and reads the fenced
	// store.
	RoleClient Role = "client"
	// RoleReader: a dashboard or an operator's eyes. It inspects, lists,
	// reads the store, asks any client's status, and reads the metrics.
	RoleReader Role = "reader"
	// RoleAdmin: everything, as any client id, and revoke.
	RoleAdmin Role = "admin"
)

// Principal is one entry of an auth file: who presents a bearer token, in
// which role, acting as which client ids.
type Principal struct {
	Name string
	Role Role
	// Clients are the glob patterns (path.Match) of the client ids a
	// RoleClient principal may act as; empty for the other roles.
	Clients []string
	// Rate is how many requests a second the principal may send to one
	// server, with bursts of as many; 0 for no limit. renew and release of
	// what the client holds are never limited (a refused renew would cost
	// an honest holder its lease), nor are the open health and openapi.json.
	Rate int
	// MaxWaiting is how many acquires with a wait the principal may have
	// blocked on one server at once; 0 for no limit.
	MaxWaiting int
	// MaxStreams is how many event streams the principal may have open on
	// one server at once; DefaultMaxStreams when the file leaves it out.
	MaxStreams int
	// MaxStoreBytes bounds the bytes of keys and values the principal's
	// writes hold in the fenced store, every lock together; 0 for no
	// bound. Unlike the other limits, it is the database's, whichever
	// server the writes went through.
	MaxStoreBytes int64
	// MaxQueued is how many of the principal's clients may stand in
	// queues through one server at once, blocked or not (a `wait: 0`
	// acquire that queues counts until its client leaves the queue); 0
	// for no limit.
	MaxQueued int
	hash      [sha256.Size]byte
}

// fileJSON and principalJSON are the auth file's format, exactly:
//
//	{"principals": [{"name": ..., "token_sha256": ..., "clients": [...], "role": ...,
//	                 "rate": ..., "max_waiting": ..., "max_streams": ..., "max_queued": ..., "max_store_bytes": ...}]}
//
// with "clients" for role client only, and the limits optional.
type fileJSON struct {
	Principals []json.RawMessage `json:"principals"`
}

type principalJSON struct {
	Name        string    `json:"name"`
	TokenSHA256 string    `json:"token_sha256"`
	Clients     *[]string `json:"clients"`
	Role        Role      `json:"role"`
	// The limits stay raw, so that "5", 5.0 and null are refused rather
	// than read as numbers or as absent.
	Rate          json.RawMessage `json:"rate"`
	MaxWaiting    json.RawMessage `json:"max_waiting"`
	MaxStreams    json.RawMessage `json:"max_streams"`
	MaxStoreBytes json.RawMessage `json:"max_store_bytes"`
	MaxQueued     json.RawMessage `json:"max_queued"`
}

// HashToken is the token_sha256 of token: its SHA-256 in lower-case hex, as
// `printf %s TOKEN | sha256sum` prints it.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// emptyHash is the hash of the empty token, which no request can present.
var emptyHash = sha256.Sum256(nil)

// LoadFile reads and checks the auth file at name (see Parse).
func LoadFile(name string) ([]Principal, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("auth file: %w", err)
	}
	ps, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("auth file %s: %w", name, err)
	}
	return ps, nil
}

// Parse checks an auth file strictly and returns its principals. It refuses,
// with an error naming the principal (by name, else by position) and the
// problem: a document that is not exactly {"principals": [...]}, an unknown
// field anywhere, no principals, a missing or duplicate name, a token_sha256
// that is not 64 hex digits, two principals with the same token, the hash of
// the empty token, an unknown role, a client role without clients, clients
// on another role, an empty or malformed pattern, a limit ("rate",
// "max_waiting", "max_streams", "max_queued") that is not an integer from
// 1 to MaxLimit, and a "max_store_bytes" that is not an integer from 1 up.
func Parse(data []byte) ([]Principal, error) {
	var f fileJSON
	if err := strictDecode(data, &f); err != nil {
		return nil, fmt.Errorf("not an auth file of the form {\"principals\": [...]}: %w", err)
	}
	if len(f.Principals) == 0 {
		return nil, errors.New(`no principals: "principals" must list at least one`)
	}
	names := map[string]int{}
	hashes := map[[sha256.Size]byte]string{}
	out := make([]Principal, 0, len(f.Principals))
	for i, raw := range f.Principals {
		p, err := parsePrincipal(raw)
		who := fmt.Sprintf("principal %d", i+1)
		if p.Name != "" {
			who += fmt.Sprintf(" (%q)", p.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", who, err)
		}
		if j, dup := names[p.Name]; dup {
			return nil, fmt.Errorf("%s: the name is also principal %d's", who, j)
		}
		names[p.Name] = i + 1
		if other, dup := hashes[p.hash]; dup {
			return nil, fmt.Errorf("%s: the same token_sha256 as principal %q: a token must identify one principal", who, other)
		}
		hashes[p.hash] = p.Name
		out = append(out, p)
	}
	return out, nil
}

func parsePrincipal(raw json.RawMessage) (Principal, error) {
	var pj principalJSON
	if err := strictDecode(raw, &pj); err != nil {
		// Name the principal in the message when its name is readable.
		var named struct {
			Name string `json:"name"`
		}
		json.Unmarshal(raw, &named)
		return Principal{Name: named.Name}, err
	}
	p := Principal{Name: pj.Name, Role: pj.Role}
	if strings.TrimSpace(pj.Name) == "" {
		return p, errors.New(`"name" is missing or empty`)
	}
	if len(pj.TokenSHA256) != 2*sha256.Size {
		return p, fmt.Errorf(`"token_sha256" must be %d hex digits (the SHA-256 of the token), got %d characters`, 2*sha256.Size, len(pj.TokenSHA256))
	}
	h, err := hex.DecodeString(pj.TokenSHA256)
	if err != nil {
		return p, fmt.Errorf(`"token_sha256" is not hex: %v`, err)
	}
	copy(p.hash[:], h)
	if p.hash == emptyHash {
		return p, errors.New(`"token_sha256" is the hash of the empty token, which no request can present`)
	}
	switch pj.Role {
	case RoleClient:
		if pj.Clients == nil || len(*pj.Clients) == 0 {
			return p, errors.New(`role "client" needs "clients": the patterns of the client ids it may act as`)
		}
		for _, pat := range *pj.Clients {
			if pat == "" {
				return p, errors.New(`"clients" has an empty pattern`)
			}
			if _, err := path.Match(pat, ""); err != nil {
				return p, fmt.Errorf(`"clients" pattern %q is malformed: %v`, pat, err)
			}
		}
		p.Clients = append([]string(nil), *pj.Clients...)
	case RoleReader, RoleAdmin:
		if pj.Clients != nil {
			return p, fmt.Errorf(`"clients" is only for role "client" (an admin acts as any client id, a reader as none)`)
		}
	case "":
		return p, errors.New(`"role" is missing: one of "client", "reader", "admin"`)
	default:
		return p, fmt.Errorf(`unknown role %q: one of "client", "reader", "admin"`, pj.Role)
	}
	if p.Rate, err = parseLimit("rate", "requests a second", pj.Rate); err != nil {
		return p, err
	}
	if p.MaxWaiting, err = parseLimit("max_waiting", "blocked acquires", pj.MaxWaiting); err != nil {
		return p, err
	}
	if p.MaxQueued, err = parseLimit("max_queued", "queued clients", pj.MaxQueued); err != nil {
		return p, err
	}
	if p.MaxStreams, err = parseLimit("max_streams", "open event streams", pj.MaxStreams); err != nil {
		return p, err
	}
	if p.MaxStreams == 0 {
		p.MaxStreams = DefaultMaxStreams
	}
	if p.MaxStoreBytes, err = parseBytes("max_store_bytes", pj.MaxStoreBytes); err != nil {
		return p, err
	}
	return p, nil
}

// strictDecode decodes one JSON value into v, refusing unknown fields and
// anything after the value.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}
