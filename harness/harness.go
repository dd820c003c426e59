// Package harness runs the contract's JSON operations (SPEC.md section 1)
// against an Engine: it decodes them, validates them in the contract's order,
// calls the engine, and turns answers and contract errors into results.
package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	lk "github.com/leasekeeper/leasekeeper"
)

// Engine is the lock service the operations drive; *service.Service is one.
// Every method returns a contract error (lk.IsContract) as a result, anything
// else as a failure that stops the run.
type Engine interface {
	Clock() (ts int64, ok bool)
	Advance(ctx context.Context, ts int64) error
	Acquire(ctx context.Context, ts int64, client, lock string, ttl int64, mode lk.Mode) (lk.AcquireResult, error)
	Renew(ctx context.Context, ts int64, client, lock string, ttl int64) (lk.Lease, error)
	Release(ctx context.Context, ts int64, client, lock string) (lk.ReleaseOutcome, error)
	Inspect(ctx context.Context, ts int64, lock string) (lk.Inspection, error)
	Write(ctx context.Context, ts int64, lock, key, value string, token int64) error
	Read(ctx context.Context, ts int64, lock, key string) (string, bool, error)
	Status(ctx context.Context, ts int64, client string) (lk.ClientStatus, error)
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
// JSON-ready values as SPEC.md section 1 shows them. It stops early only when
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
// (service.Service.Batch): a replay on PostgreSQL, where a transaction's
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
		if strings.ContainsAny(string(n), ".eE") {
			return 0, false
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		return i, err == nil
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
	a := arr[2:]
	switch opName {
	case "acquire":
		client, ok1 := name(a[0])
		lock, ok2 := name(a[1])
		ttl, ok3 := Integer(a[2])
		mode := lk.Exclusive
		ok4 := true
		if len(a) == 4 {
			s, _ := a[3].(string)
			mode = lk.Mode(s)
			ok4 = mode.Valid()
		}
		if !(ok1 && ok2 && ok3 && ok4) {
			return r.invalid(ts)
		}
		res, err := r.e.Acquire(r.ctx, ts, client, lock, ttl, mode)
		return acquireResult(res), err
	case "renew":
		client, ok1 := name(a[0])
		lock, ok2 := name(a[1])
		ttl, ok3 := Integer(a[2])
		if !(ok1 && ok2 && ok3) {
			return r.invalid(ts)
		}
		l, err := r.e.Renew(r.ctx, ts, client, lock, ttl)
		return []any{"renewed", l.Token, l.ExpiresAt}, err
	case "release":
		client, ok1 := name(a[0])
		lock, ok2 := name(a[1])
		if !(ok1 && ok2) {
			return r.invalid(ts)
		}
		out, err := r.e.Release(r.ctx, ts, client, lock)
		if out == lk.Withdrawn {
			return "withdrawn", err
		}
		return "released", err
	case "inspect":
		lock, ok := name(a[0])
		if !ok {
			return r.invalid(ts)
		}
		in, err := r.e.Inspect(r.ctx, ts, lock)
		return inspectResult(in), err
	case "write":
		lock, ok1 := name(a[0])
		key, ok2 := name(a[1])
		value, ok3 := name(a[2])
		token, ok4 := Integer(a[3])
		if !(ok1 && ok2 && ok3 && ok4 && token >= 1) {
			return r.invalid(ts)
		}
		return "ok", r.e.Write(r.ctx, ts, lock, key, value, token)
	case "read":
		lock, ok1 := name(a[0])
		key, ok2 := name(a[1])
		if !(ok1 && ok2) {
			return r.invalid(ts)
		}
		v, found, err := r.e.Read(r.ctx, ts, lock, key)
		if !found {
			return nil, err
		}
		return v, err
	case "status":
		client, ok := name(a[0])
		if !ok {
			return r.invalid(ts)
		}
		st, err := r.e.Status(r.ctx, ts, client)
		return statusResult(st), err
	case "repeat":
		return r.repeat(ts, a)
	}
	panic("unreachable: operation " + opName + " has an arity but no case")
}

// invalid answers a validation failure found after ts was accepted: time still
// advances (rule 5).
func (r *runner) invalid(ts int64) (any, error) {
	return resInvalid, r.e.Advance(r.ctx, ts)
}
