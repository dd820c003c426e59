// Package harness runs the contract's JSON operations (docs/contract.md
// section 1) against an Engine: it decodes each into the typed request of
// package leasekeeper, validating in the contract's order, calls the engine,
// and encodes the typed result, or contract error, as the contract's tuple
// (Tuple). The tuples are the contract's test format, `leasekeeper run`'s
// output; the HTTP API does not use them.
//
// It is part of leasekeeper's implementation, not meant for import by other
// modules: its API is not stable. Programs use package leasekeeper's types and
// package client.
package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	lk "github.com/leasekeeper/leasekeeper"
)

// Engine is the lock service the operations drive; *engine.Direct is one.
// It takes the operations as the typed requests of package leasekeeper and
// returns their typed results. Every method returns a contract error
// (lk.IsContract) as a result, anything else as a failure that stops the run.
type Engine interface {
	Clock() (ts int64, ok bool)
	Advance(ctx context.Context, ts int64) error
	Acquire(ctx context.Context, ts int64, req lk.AcquireRequest) (lk.AcquireResult, error)
	Renew(ctx context.Context, ts int64, req lk.RenewRequest) (lk.RenewResult, error)
	Release(ctx context.Context, ts int64, req lk.ReleaseRequest) (lk.ReleaseResult, error)
	Inspect(ctx context.Context, ts int64, req lk.InspectRequest) (lk.InspectResult, error)
	Write(ctx context.Context, ts int64, req lk.WriteRequest) (lk.WriteResult, error)
	Read(ctx context.Context, ts int64, req lk.ReadRequest) (lk.ReadResult, error)
	Status(ctx context.Context, ts int64, req lk.StatusRequest) (lk.StatusResult, error)
}

// ErrNotArray is returned by Decode for input that is neither a JSON array of
// operations nor a case object holding one.
var ErrNotArray = errors.New("input is not a JSON array of operations")

// Input is what Decode read: the operations, and the expected results when the
// input was a case object {"ops": [...], "want": [...]} (want is nil otherwise).
type Input struct {
	Ops  []any
	Want []any
}

// Decode reads one JSON document: an array of operations, or a case object
// {"ops": [...], "want": [...]} as in testdata/ (want optional). Numbers stay
// json.Number so that the validator can tell 5 from 5.0 and 1e3.
func Decode(r io.Reader) (Input, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return Input{}, fmt.Errorf("%w: the input is empty", ErrNotArray)
		}
		return Input{}, fmt.Errorf("%w: %v", ErrNotArray, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Input{}, fmt.Errorf("%w: unexpected data after the first JSON value", ErrNotArray)
	}
	switch d := doc.(type) {
	case []any:
		return Input{Ops: d}, nil
	case map[string]any:
		ops, ok := d["ops"].([]any)
		if !ok {
			return Input{}, fmt.Errorf("%w: it is an object without an \"ops\" array", ErrNotArray)
		}
		in := Input{Ops: ops}
		if w, present := d["want"]; present {
			if in.Want, ok = w.([]any); !ok {
				return Input{}, fmt.Errorf("%w: \"want\" is not an array", ErrNotArray)
			}
		}
		return in, nil
	}
	return Input{}, fmt.Errorf("%w: it is %s", ErrNotArray, kindOf(doc))
}

func kindOf(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "an unexpected value"
}

// Run executes ops in order against e and returns one result per operation:
// JSON-ready values as docs/contract.md section 1 shows them. It stops early only when
// the engine fails (not for contract errors, which are results).
func Run(ctx context.Context, e Engine, ops []any) ([]any, error) {
	if b, ok := e.(batcher); ok {
		var out []any
		err := b.Batch(ctx, func(step func() error) error {
			var err error
			out, err = run(ctx, e, ops, step)
			return err
		})
		return out, err
	}
	return run(ctx, e, ops, func() error { return nil })
}

// batcher is an engine that may run many operations per transaction
// (engine.Direct.Batch): a replay on PostgreSQL, where a transaction's
// round trips cost far more than an operation's work.
type batcher interface {
	Batch(ctx context.Context, fn func(step func() error) error) error
}

func run(ctx context.Context, e Engine, ops []any, step func() error) ([]any, error) {
	r := runner{ctx: ctx, e: e, batchStep: step}
	out := make([]any, 0, len(ops))
	for _, op := range ops {
		res, err := r.exec(op)
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	return out, nil
}

// Encode writes results as a JSON array, one result per line.
func Encode(w io.Writer, results []any) error {
	var b strings.Builder
	b.WriteString("[")
	for i, r := range results {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n")
		j, err := json.Marshal(r)
		if err != nil {
			return err
		}
		b.Write(j)
	}
	b.WriteString("\n]\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// The operation names (rule 2), and how many elements each takes.
var arity = map[string][2]int{
	"acquire": {5, 6},
	"renew":   {5, 5},
	"release": {4, 4},
	"inspect": {3, 3},
	"write":   {6, 6},
	"read":    {4, 4},
	"status":  {3, 3},
	"repeat":  {5, 5},
}

const (
	resInvalid = "error: invalid arguments"
	resUnknown = "error: unknown operation"
)

type runner struct {
	ctx       context.Context
	e         Engine
	batchStep func() error // after each operation, repeat runs included (Batch)
}

// Integer accepts a JSON number (json.Number) written without fraction or
// exponent that fits in an int64: the contract's integer (rule 3). It also
// accepts an int64, which is what repeat hands its runs.
func Integer(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		return lk.Integer(n)
	case int64:
		return n, true
	}
	return 0, false
}

func name(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok && s != ""
}

// exec runs one operation and turns a contract error into its result.
func (r *runner) exec(op any) (any, error) {
	res, err := r.step(op)
	if err == nil {
		err = r.batchStep()
	}
	if err != nil {
		if code := lk.Code(err); code != "" {
			return "error: " + code, nil
		}
		return nil, err
	}
	return res, nil
}

// step runs one operation through validation rules 1-9 in their order.
func (r *runner) step(op any) (any, error) {
	arr, ok := op.([]any)
	if !ok || len(arr) == 0 {
		return resInvalid, nil
	}
	opName, _ := arr[0].(string)
	bounds, known := arity[opName]
	if !known {
		return resUnknown, nil
	}
	if len(arr) < 2 {
		return resInvalid, nil
	}
	ts, ok := Integer(arr[1])
	if !ok {
		return resInvalid, nil
	}
	if clock, set := r.e.Clock(); set && ts < clock {
		return resInvalid, nil
	}
	if len(arr) < bounds[0] || len(arr) > bounds[1] {
		return r.invalid(ts)
	}
	if opName == "repeat" {
		return r.repeat(ts, arr[2:])
	}
	req, ok := decodeRequest(opName, arr[2:])
	if !ok {
		return r.invalid(ts)
	}
	if err := req.Validate(); err != nil {
		// Every check of rule 7 comes before the ttl's range (rule 8):
		// Validate keeps that order. Time still advances (rule 5).
		if aerr := r.e.Advance(r.ctx, ts); aerr != nil {
			return nil, aerr
		}
		return nil, err
	}
	res, err := r.do(ts, req)
	if err != nil {
		return nil, err
	}
	return Tuple(res), nil
}

// request is an operation of package leasekeeper (lk.AcquireRequest, ...).
type request interface{ Validate() error }

// decodeRequest reads the arguments of an operation (those after its ts)
// into its typed request: the type checks of rule 7. ok is false when one of
// them fails. The arity was checked.
func decodeRequest(opName string, a []any) (req request, ok bool) {
	switch opName {
	case "acquire":
		client, ok1 := name(a[0])
		lock, ok2 := name(a[1])
		ttl, ok3 := Integer(a[2])
		mode := lk.Exclusive
		if len(a) == 4 {
			s, _ := a[3].(string)
			mode = lk.Mode(s)
		}
		return lk.AcquireRequest{Client: client, Lock: lock, TTL: ttl, Mode: mode}, ok1 && ok2 && ok3
	case "renew":
		client, ok1 := name(a[0])
		lock, ok2 := name(a[1])
		ttl, ok3 := Integer(a[2])
		return lk.RenewRequest{Client: client, Lock: lock, TTL: ttl}, ok1 && ok2 && ok3
	case "release":
		client, ok1 := name(a[0])
		lock, ok2 := name(a[1])
		return lk.ReleaseRequest{Client: client, Lock: lock}, ok1 && ok2
	case "inspect":
		lock, ok := name(a[0])
		return lk.InspectRequest{Lock: lock}, ok
	case "write":
		lock, ok1 := name(a[0])
		key, ok2 := name(a[1])
		value, ok3 := name(a[2])
		token, ok4 := Integer(a[3])
		return lk.WriteRequest{Lock: lock, Key: key, Value: value, Token: token}, ok1 && ok2 && ok3 && ok4
	case "read":
		lock, ok1 := name(a[0])
		key, ok2 := name(a[1])
		return lk.ReadRequest{Lock: lock, Key: key}, ok1 && ok2
	case "status":
		client, ok := name(a[0])
		// The contract's status has no rank: not counting it keeps a
		// queue's statuses linear (section 6).
		return lk.StatusRequest{Client: client, WithoutPosition: true}, ok
	}
	panic("unreachable: operation " + opName + " has an arity but no case")
}

// do runs a valid request on the engine and returns its typed result.
func (r *runner) do(ts int64, req request) (any, error) {
	switch q := req.(type) {
	case lk.AcquireRequest:
		return r.e.Acquire(r.ctx, ts, q)
	case lk.RenewRequest:
		return r.e.Renew(r.ctx, ts, q)
	case lk.ReleaseRequest:
		return r.e.Release(r.ctx, ts, q)
	case lk.InspectRequest:
		return r.e.Inspect(r.ctx, ts, q)
	case lk.WriteRequest:
		return r.e.Write(r.ctx, ts, q)
	case lk.ReadRequest:
		return r.e.Read(r.ctx, ts, q)
	case lk.StatusRequest:
		return r.e.Status(r.ctx, ts, q)
	}
	panic(fmt.Sprintf("unreachable: request %T", req))
}

// invalid answers a validation failure found after ts was accepted: time still
// advances (rule 5).
func (r *runner) invalid(ts int64) (any, error) {
	return resInvalid, r.e.Advance(r.ctx, ts)
}
