package main

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/anishathalye/porcupine"
)

type opKind uint8

const (
	opPut opKind = iota
	opGet
	opDel
	opCas
)

// input is an operation's invocation.
type input struct {
	kind          opKind
	key           string
	value         int64 // put, cas: the value written
	expectPresent bool  // cas: false = only if absent (put_if_not_exist)
	expect        int64 // cas: the value the key must hold
}

// output is an operation's response. A pending operation (no response
// recorded) accepts any outcome.
type output struct {
	pending bool
	ok      bool  // del: the key existed; cas: the condition held
	present bool  // get: the key had a value
	value   int64 // get: that value
}

// state is one key's register: absent, or holding value. It is comparable,
// so Porcupine's default == equality applies.
type state struct {
	present bool
	value   int64
}

func step(st, in, out interface{}) (bool, interface{}) {
	s := st.(state)
	i := in.(input)
	o := out.(output)
	switch i.kind {
	case opPut:
		return true, state{present: true, value: i.value}
	case opGet:
		if o.pending {
			return true, s
		}
		return o.present == s.present && (!s.present || o.value == s.value), s
	case opDel:
		if o.pending {
			return true, state{}
		}
		if o.ok {
			return s.present, state{}
		}
		return !s.present, s
	case opCas:
		match := s.present == i.expectPresent && (!s.present || s.value == i.expect)
		next := s
		if match {
			next = state{present: true, value: i.value}
		}
		if o.pending {
			return true, next
		}
		return o.ok == match, next
	}
	panic(fmt.Sprintf("unknown op kind %d", i.kind))
}

// partitionByKey splits a history into one sub-history per key, in key order
// (so that partition i is the same key on every run).
func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	for _, op := range history {
		k := op.Input.(input).key
		byKey[k] = append(byKey[k], op)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([][]porcupine.Operation, len(keys))
	for i, k := range keys {
		out[i] = byKey[k]
	}
	return out
}

func partitionEventsByKey(history []porcupine.Event) [][]porcupine.Event {
	keyOf := map[int]string{} // call id -> key
	byKey := map[string][]porcupine.Event{}
	for _, ev := range history {
		var k string
		if ev.Kind == porcupine.CallEvent {
			k = ev.Value.(input).key
			keyOf[ev.Id] = k
		} else {
			k = keyOf[ev.Id]
		}
		byKey[k] = append(byKey[k], ev)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([][]porcupine.Event, len(keys))
	for i, k := range keys {
		out[i] = byKey[k]
	}
	return out
}

func describeValue(present bool, v int64) string {
	if !present {
		return "∅"
	}
	return strconv.FormatInt(v, 10)
}

func describeOperation(in, out interface{}) string {
	i := in.(input)
	o := out.(output)
	k := strconv.Quote(i.key)
	var call string
	switch i.kind {
	case opPut:
		call = fmt.Sprintf("put(%s, %d)", k, i.value)
	case opGet:
		call = fmt.Sprintf("get(%s)", k)
	case opDel:
		call = fmt.Sprintf("del(%s)", k)
	case opCas:
		call = fmt.Sprintf("cas(%s, %s → %d)", k, describeValue(i.expectPresent, i.expect), i.value)
	}
	if o.pending {
		return call + " → ? (pending)"
	}
	switch i.kind {
	case opPut:
		return call
	case opGet:
		return call + " → " + describeValue(o.present, o.value)
	case opDel:
		if o.ok {
			return call + " → ok"
		}
		return call + " → notfound"
	default:
		if o.ok {
			return call + " → ok"
		}
		return call + " → cmpfail"
	}
}

// kvModel is a register per key, partitioned by key.
var kvModel = porcupine.Model{
	Partition:      partitionByKey,
	PartitionEvent: partitionEventsByKey,
	Init:           func() interface{} { return state{} },
	Step:           step,
	Hash: func(st interface{}) uint64 {
		s := st.(state)
		if !s.present {
			return 0
		}
		return uint64(s.value)*0x9e3779b97f4a7c15 + 1
	},
	DescribeOperation: describeOperation,
	DescribeState: func(st interface{}) string {
		s := st.(state)
		return describeValue(s.present, s.value)
	},
	DescribeOperationMetadata: func(m interface{}) string {
		md, ok := m.(metadata)
		if !ok {
			return ""
		}
		if md.pending {
			return fmt.Sprintf("client %d, line %d, pending", md.client, md.line)
		}
		return fmt.Sprintf("client %d, line %d", md.client, md.line)
	},
}
