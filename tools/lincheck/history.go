package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/anishathalye/porcupine"
)

// record is one line of the input, as written by the history recorder.
//
// Fields that may be null are pointers; "output" is kept raw so that a
// completed get must state its result explicitly (null = absent) rather than
// silently reading as absent when the field is missing.
type record struct {
	Client *int64          `json:"client"`
	Op     *string         `json:"op"`
	Key    *string         `json:"key"`
	Value  *int64          `json:"value"`
	Expect *int64          `json:"expect"`
	Call   *int64          `json:"call"`
	Return *int64          `json:"return"`
	Ok     *bool           `json:"ok"`
	Output json.RawMessage `json:"output"`
}

// history is a parsed input file.
type history struct {
	ops     []porcupine.Operation // operations handed to the checker
	total   int                   // operations read (including pending gets, which constrain nothing)
	keys    int                   // distinct keys
	clients int                   // distinct clients
}

// metadata travels with each operation into the visualization.
type metadata struct {
	client  int64
	line    int
	pending bool
}

// parseHistory reads a JSON-lines history. Blank lines are skipped; any other
// malformed line is an error naming its line number.
func parseHistory(r io.Reader) (*history, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	h := &history{}
	keys := map[string]struct{}{}
	clientIDs := map[int64]struct{}{}
	type pendingOp struct {
		op     porcupine.Operation
		client int64
	}
	var parsed []pendingOp
	lineNo := 0
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			lineNo++
			trimmed := bytes.TrimSpace(line)
			if len(trimmed) > 0 {
				op, client, skip, perr := parseLine(trimmed, lineNo)
				if perr != nil {
					return nil, fmt.Errorf("line %d: %w", lineNo, perr)
				}
				h.total++
				keys[op.Input.(input).key] = struct{}{}
				clientIDs[client] = struct{}{}
				if !skip {
					parsed = append(parsed, pendingOp{op, client})
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading history: %w", err)
		}
	}
	// Porcupine's visualization lays clients out by a zero-based index:
	// map the recorder's client ids, in increasing order, onto 0..n-1.
	sortedClients := make([]int64, 0, len(clientIDs))
	for c := range clientIDs {
		sortedClients = append(sortedClients, c)
	}
	sort.Slice(sortedClients, func(i, j int) bool { return sortedClients[i] < sortedClients[j] })
	index := make(map[int64]int, len(sortedClients))
	for i, c := range sortedClients {
		index[c] = i
	}
	h.ops = make([]porcupine.Operation, len(parsed))
	for i, p := range parsed {
		p.op.ClientId = index[p.client]
		h.ops[i] = p.op
	}
	h.keys = len(keys)
	h.clients = len(clientIDs)
	return h, nil
}

// parseLine turns one JSON object into an operation. skip is true for a
// pending get: its result is unknown and it changes nothing, so it
// constrains no linearization and is left out of the search.
func parseLine(line []byte, lineNo int) (op porcupine.Operation, client int64, skip bool, err error) {
	var rec record
	dec := json.NewDecoder(bytes.NewReader(line))
	if err = dec.Decode(&rec); err != nil {
		return op, 0, false, fmt.Errorf("bad JSON: %v", err)
	}
	if dec.More() {
		return op, 0, false, fmt.Errorf("bad JSON: trailing data after the object")
	}
	if rec.Client == nil {
		return op, 0, false, fmt.Errorf(`missing "client"`)
	}
	if rec.Op == nil {
		return op, 0, false, fmt.Errorf(`missing "op"`)
	}
	if rec.Key == nil {
		return op, 0, false, fmt.Errorf(`missing "key"`)
	}
	if rec.Call == nil {
		return op, 0, false, fmt.Errorf(`missing "call"`)
	}
	in := input{key: *rec.Key}
	switch *rec.Op {
	case "put":
		in.kind = opPut
	case "get":
		in.kind = opGet
	case "del":
		in.kind = opDel
	case "cas":
		in.kind = opCas
	default:
		return op, 0, false, fmt.Errorf(`unknown "op" %q (want put, get, del or cas)`, *rec.Op)
	}
	name := *rec.Op

	// value and expect
	switch in.kind {
	case opPut, opCas:
		if rec.Value == nil {
			return op, 0, false, fmt.Errorf(`%s needs an integer "value"`, name)
		}
		in.value = *rec.Value
	default:
		if rec.Value != nil {
			return op, 0, false, fmt.Errorf(`%s takes no "value" (a get's result goes in "output")`, name)
		}
	}
	if in.kind == opCas {
		if rec.Expect != nil {
			in.expectPresent = true
			in.expect = *rec.Expect
		}
	} else if rec.Expect != nil {
		return op, 0, false, fmt.Errorf(`%s takes no "expect"`, name)
	}

	// output: null, absent or an integer
	var outVal *int64
	outGiven := len(rec.Output) > 0
	if outGiven && !bytes.Equal(bytes.TrimSpace(rec.Output), []byte("null")) {
		var v int64
		if err := json.Unmarshal(rec.Output, &v); err != nil {
			return op, 0, false, fmt.Errorf(`"output" must be an integer or null: %v`, err)
		}
		outVal = &v
	}

	pending := rec.Return == nil
	out := output{}
	ret := int64(math.MaxInt64) // +infinity: a pending op may take effect at any time after its call
	if pending {
		if rec.Ok != nil || outVal != nil {
			return op, 0, false, fmt.Errorf(`a pending operation ("return": null) must have "ok" and "output" null`)
		}
		out.pending = true
	} else {
		ret = *rec.Return
		if ret < *rec.Call {
			return op, 0, false, fmt.Errorf(`"return" %d is before "call" %d`, ret, *rec.Call)
		}
		if ret == math.MaxInt64 {
			return op, 0, false, fmt.Errorf(`"return" %d is reserved for pending operations; use null`, ret)
		}
		switch in.kind {
		case opPut:
			if rec.Ok != nil && !*rec.Ok {
				return op, 0, false, fmt.Errorf(`a completed put always succeeds: "ok": false is not allowed (leave out puts known to have failed; use "return": null when the outcome is unknown)`)
			}
			if outVal != nil {
				return op, 0, false, fmt.Errorf(`put has no "output"`)
			}
			out.ok = true
		case opGet:
			if rec.Ok != nil && !*rec.Ok {
				return op, 0, false, fmt.Errorf(`a completed get cannot have "ok": false`)
			}
			if !outGiven {
				return op, 0, false, fmt.Errorf(`a completed get needs "output" (null when the key is absent)`)
			}
			if outVal != nil {
				out.present = true
				out.value = *outVal
			}
		case opDel, opCas:
			if rec.Ok == nil {
				return op, 0, false, fmt.Errorf(`a completed %s needs "ok": true or false`, name)
			}
			if outVal != nil {
				return op, 0, false, fmt.Errorf(`%s has no "output"`, name)
			}
			out.ok = *rec.Ok
		}
	}
	op = porcupine.Operation{
		Input:    in,
		Call:     *rec.Call,
		Output:   out,
		Return:   ret,
		Metadata: metadata{client: *rec.Client, line: lineNo, pending: pending},
	}
	return op, *rec.Client, pending && in.kind == opGet, nil
}
