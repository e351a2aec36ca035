package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// h is one history line, written the way a recorder would write it.
type h struct {
	Client int    `json:"client"`
	Op     string `json:"op"`
	Key    string `json:"key"`
	Value  *int64 `json:"value"`
	Expect *int64 `json:"expect"`
	Call   int64  `json:"call"`
	Return *int64 `json:"return"`
	Ok     *bool  `json:"ok"`
	Output *int64 `json:"output"`
}

func i64(v int64) *int64 { return &v }
func b(v bool) *bool     { return &v }

func put(c int, k string, v, call, ret int64) h {
	return h{Client: c, Op: "put", Key: k, Value: i64(v), Call: call, Return: i64(ret), Ok: b(true)}
}
func get(c int, k string, out *int64, call, ret int64) h {
	return h{Client: c, Op: "get", Key: k, Call: call, Return: i64(ret), Output: out}
}
func del(c int, k string, ok bool, call, ret int64) h {
	return h{Client: c, Op: "del", Key: k, Call: call, Return: i64(ret), Ok: b(ok)}
}
func cas(c int, k string, expect *int64, v int64, ok bool, call, ret int64) h {
	return h{Client: c, Op: "cas", Key: k, Expect: expect, Value: i64(v), Call: call, Return: i64(ret), Ok: b(ok)}
}

// pending drops an operation's outcome: it never returned.
func pending(op h) h {
	op.Return = nil
	op.Ok = nil
	op.Output = nil
	return op
}

func encode(t testing.TB, ops []h) string {
	t.Helper()
	var buf bytes.Buffer
	for _, op := range ops {
		line, err := json.Marshal(op)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	return buf.String()
}

type outcome struct {
	code    int
	sum     summary
	stdout  string
	stderr  string
	elapsed time.Duration
}

func runText(t testing.TB, text string, args ...string) outcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run(args, strings.NewReader(text), &stdout, &stderr)
	o := outcome{code: code, stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	if code != exitUnknown || strings.Contains(o.stdout, "{") {
		lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
		if len(lines) != 1 {
			t.Fatalf("want one summary line on stdout, got %q", o.stdout)
		}
		if err := json.Unmarshal([]byte(lines[0]), &o.sum); err != nil {
			t.Fatalf("summary %q: %v", lines[0], err)
		}
	}
	return o
}

func check(t *testing.T, ops []h, wantCode int, args ...string) outcome {
	t.Helper()
	o := runText(t, encode(t, ops), args...)
	if o.code != wantCode {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s\nhistory:\n%s", o.code, wantCode, o.stdout, o.stderr, encode(t, ops))
	}
	want := map[int]string{exitOk: "ok", exitIllegal: "illegal", exitUnknown: "unknown"}[wantCode]
	if o.sum.Result != want {
		t.Fatalf("summary result %q, want %q (stdout %s)", o.sum.Result, want, o.stdout)
	}
	if o.sum.Ops != len(ops) {
		t.Fatalf("summary ops %d, want %d", o.sum.Ops, len(ops))
	}
	return o
}

func TestLinearizableConcurrentHistory(t *testing.T) {
	ops := []h{
		// x: concurrent puts; reads overlapping them see either value,
		// then a cas and a del whose outcomes fit one order.
		put(0, "x", 1, 0, 100),
		put(1, "x", 2, 10, 90),
		get(2, "x", i64(2), 20, 50),  // linearized after put 2 ...
		get(3, "x", i64(1), 60, 120), // ... and put 1 after it
		get(2, "x", i64(1), 130, 140),
		cas(0, "x", i64(1), 3, true, 150, 200),
		cas(1, "x", i64(1), 4, false, 160, 210), // lost to the other cas
		get(2, "x", i64(3), 220, 230),
		del(3, "x", true, 240, 260),
		del(0, "x", false, 250, 270), // concurrent del: one finds nothing
		get(1, "x", nil, 280, 290),
		cas(2, "x", nil, 7, true, 300, 310), // put_if_not_exist on an absent key
		cas(3, "x", nil, 8, false, 320, 330),
		get(0, "x", i64(7), 340, 350),
		// y: independent key, a read concurrent with the first write may
		// see it absent.
		get(4, "y", nil, 0, 30),
		put(5, "y", 9, 5, 25),
		get(4, "y", i64(9), 40, 50),
		// touching intervals are concurrent (closed intervals)
		put(5, "z", 1, 0, 10),
		get(4, "z", nil, 10, 20),
	}
	o := check(t, ops, exitOk)
	if o.sum.Keys != 3 {
		t.Fatalf("keys %d, want 3", o.sum.Keys)
	}
}

func TestStaleReadAfterCompletedPut(t *testing.T) {
	ops := []h{
		put(0, "x", 1, 0, 10),
		put(1, "x", 2, 20, 30),
		get(2, "x", i64(1), 40, 50), // put 2 completed before the get began
	}
	o := check(t, ops, exitIllegal)
	if !strings.Contains(o.stderr, `"x"`) {
		t.Fatalf("stderr should name key x: %s", o.stderr)
	}
	// The same read overlapping put 2 is fine.
	ops[2] = get(2, "x", i64(1), 25, 50)
	check(t, ops, exitOk)
}

func TestTwoCasSameExpectBothSucceed(t *testing.T) {
	ops := []h{
		put(0, "x", 0, 0, 10),
		cas(1, "x", i64(0), 1, true, 20, 40),
		cas(2, "x", i64(0), 2, true, 25, 45),
	}
	check(t, ops, exitIllegal)
	ops[2].Ok = b(false)
	check(t, ops, exitOk)

	// put_if_not_exist twice, both winning
	ops = []h{
		cas(1, "y", nil, 1, true, 0, 40),
		cas(2, "y", nil, 2, true, 10, 30),
	}
	check(t, ops, exitIllegal)
}

func TestReadOfValueNeverWritten(t *testing.T) {
	ops := []h{
		put(0, "x", 1, 0, 10),
		put(1, "x", 2, 5, 15),
		get(2, "x", i64(42), 0, 100),
	}
	check(t, ops, exitIllegal)
	// a read of an absent key that was never written, returning a value
	check(t, []h{get(0, "never", i64(1), 0, 1)}, exitIllegal)
}

func TestDelOkTwiceForOnePut(t *testing.T) {
	ops := []h{
		put(0, "x", 1, 0, 10),
		del(1, "x", true, 20, 40),
		del(2, "x", true, 25, 35),
	}
	check(t, ops, exitIllegal)
	ops[2].Ok = b(false)
	check(t, ops, exitOk)
	// del of a key that exists must not report NOTFOUND
	check(t, []h{put(0, "x", 1, 0, 10), del(1, "x", false, 20, 30)}, exitIllegal)
}

func TestPendingPut(t *testing.T) {
	p := pending(put(0, "x", 1, 10, 0))
	// It may have taken effect ...
	check(t, []h{p, get(1, "x", i64(1), 100, 110)}, exitOk)
	// ... or not (yet) ...
	check(t, []h{p, get(1, "x", nil, 100, 110)}, exitOk)
	// ... or later than a first read, at any time after its call.
	check(t, []h{p, get(1, "x", nil, 100, 110), get(1, "x", i64(1), 1000, 1010)}, exitOk)
	// But once seen it stays: nothing removes it.
	check(t, []h{p, get(1, "x", i64(1), 100, 110), get(1, "x", nil, 200, 210)}, exitIllegal)
	// And it cannot take effect before it was called.
	check(t, []h{p, get(1, "x", i64(1), 0, 5)}, exitIllegal)
	// It takes effect at most once: seen, overwritten, it cannot come back.
	check(t, []h{p, get(1, "x", i64(1), 100, 110), put(2, "x", 2, 120, 130), get(1, "x", i64(1), 140, 150)}, exitIllegal)
}

func TestPendingCasAndDel(t *testing.T) {
	base := []h{put(0, "x", 0, 0, 10)}
	pc := pending(cas(1, "x", i64(0), 5, false, 20, 0))
	check(t, append(base, pc, get(2, "x", i64(0), 30, 40), get(2, "x", i64(5), 50, 60)), exitOk)
	check(t, append(base, pc, get(2, "x", i64(0), 30, 40)), exitOk)
	check(t, append(base, pc, get(2, "x", i64(5), 30, 40), get(2, "x", i64(0), 50, 60)), exitIllegal)
	// a pending cas whose condition never held cannot have written
	check(t, append(base, pending(cas(1, "x", i64(9), 5, false, 20, 0)), get(2, "x", i64(5), 30, 40)), exitIllegal)

	pd := pending(del(1, "x", false, 20, 0))
	check(t, append(base, pd, get(2, "x", nil, 30, 40)), exitOk)
	check(t, append(base, pd, get(2, "x", i64(0), 30, 40)), exitOk)
	check(t, append(base, pd, get(2, "x", nil, 30, 40), get(2, "x", i64(0), 50, 60)), exitIllegal)
	// a pending del explains a later del's NOTFOUND
	check(t, append(base, pd, del(2, "x", false, 30, 40)), exitOk)
	// a pending get constrains nothing and is still counted
	o := check(t, append(base, pending(get(3, "x", nil, 5, 0)), get(2, "x", i64(0), 30, 40)), exitOk)
	if o.sum.Ops != 3 {
		t.Fatalf("ops %d, want 3", o.sum.Ops)
	}
}

func TestIllegalKeysAndVisualization(t *testing.T) {
	ops := []h{
		put(0, "a", 1, 0, 10), get(1, "a", i64(1), 20, 30), // fine
		put(0, "b", 1, 0, 10), get(1, "b", i64(2), 20, 30), // bad
		put(0, "c", 1, 0, 10), del(1, "c", false, 20, 30), // bad
	}
	viz := filepath.Join(t.TempDir(), "viz.html")
	o := check(t, ops, exitIllegal, "-viz", viz)
	if !strings.Contains(o.stderr, `2 key(s): "b", "c"`) {
		t.Fatalf("stderr should list keys b and c: %s", o.stderr)
	}
	data, err := os.ReadFile(viz)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("<html")) || !bytes.Contains(data, []byte(`del(\"c\")`)) {
		t.Fatalf("visualization lacks expected content (%d bytes)", len(data))
	}
	if bytes.Contains(data, []byte(`put(\"a\"`)) {
		t.Fatalf("visualization should only show the failing keys")
	}
	// No visualization for a linearizable history.
	viz2 := filepath.Join(t.TempDir(), "ok.html")
	check(t, ops[:2], exitOk, "-viz", viz2)
	if _, err := os.Stat(viz2); err == nil {
		t.Fatalf("visualization written for a linearizable history")
	}
}

func TestBadInput(t *testing.T) {
	cases := map[string]string{
		"not json":          "{bad\n",
		"array":             "[1,2]\n",
		"trailing":          `{"client":0,"op":"put","key":"x","value":1,"call":0,"return":1,"ok":true} {}` + "\n",
		"unknown op":        `{"client":0,"op":"incr","key":"x","value":1,"call":0,"return":1}` + "\n",
		"missing key":       `{"client":0,"op":"put","value":1,"call":0,"return":1}` + "\n",
		"missing client":    `{"op":"put","key":"x","value":1,"call":0,"return":1}` + "\n",
		"missing call":      `{"client":0,"op":"put","key":"x","value":1,"return":1}` + "\n",
		"put null value":    `{"client":0,"op":"put","key":"x","value":null,"call":0,"return":1}` + "\n",
		"float value":       `{"client":0,"op":"put","key":"x","value":1.5,"call":0,"return":1}` + "\n",
		"string value":      `{"client":0,"op":"put","key":"x","value":"1","call":0,"return":1}` + "\n",
		"return < call":     `{"client":0,"op":"put","key":"x","value":1,"call":5,"return":1}` + "\n",
		"get no output":     `{"client":0,"op":"get","key":"x","call":0,"return":1}` + "\n",
		"get with value":    `{"client":0,"op":"get","key":"x","value":3,"call":0,"return":1,"output":3}` + "\n",
		"del no ok":         `{"client":0,"op":"del","key":"x","call":0,"return":1}` + "\n",
		"cas no ok":         `{"client":0,"op":"cas","key":"x","value":1,"expect":null,"call":0,"return":1}` + "\n",
		"put ok false":      `{"client":0,"op":"put","key":"x","value":1,"call":0,"return":1,"ok":false}` + "\n",
		"pending with ok":   `{"client":0,"op":"del","key":"x","call":0,"return":null,"ok":true}` + "\n",
		"put with expect":   `{"client":0,"op":"put","key":"x","value":1,"expect":2,"call":0,"return":1}` + "\n",
		"bad line after ok": `{"client":0,"op":"put","key":"x","value":1,"call":0,"return":1}` + "\n" + "oops\n",
	}
	for name, text := range cases {
		t.Run(name, func(t *testing.T) {
			o := runText(t, text)
			if o.code != exitUnknown {
				t.Fatalf("exit %d, want 2; stderr %s", o.code, o.stderr)
			}
			if !strings.Contains(o.stderr, "line ") {
				t.Fatalf("stderr should name the line: %q", o.stderr)
			}
			if o.stdout != "" {
				t.Fatalf("no summary expected on bad input, got %q", o.stdout)
			}
		})
	}
	// a missing file
	o := runText(t, "", filepath.Join(t.TempDir(), "nope.jsonl"))
	if o.code != exitUnknown {
		t.Fatalf("missing file: exit %d, want 2", o.code)
	}
	// bad flags
	if o := runText(t, "", "-timeout", "soon"); o.code != exitUnknown {
		t.Fatalf("bad flag: exit %d, want 2", o.code)
	}
}

func TestEmptyAndBlankLines(t *testing.T) {
	o := runText(t, "")
	if o.code != exitOk || o.sum.Ops != 0 || o.sum.Keys != 0 {
		t.Fatalf("empty history: %+v", o)
	}
	text := "\n" + encode(t, []h{put(0, "x", 1, 0, 1)}) + "\n   \n" + encode(t, []h{get(1, "x", i64(1), 2, 3)})
	o = runText(t, strings.TrimSuffix(text, "\n")) // last line without newline
	if o.code != exitOk || o.sum.Ops != 2 {
		t.Fatalf("blank lines: %+v", o)
	}
}

func TestClientIdsNeedNotBeDense(t *testing.T) {
	check(t, []h{put(1000, "x", 1, 0, 10), get(-7, "x", i64(1), 20, 30), get(42, "x", nil, 40, 50)}, exitIllegal, "-viz", filepath.Join(t.TempDir(), "v.html"))
}

// TestTimeoutIsUnknown builds a history that is hard to refute: many
// concurrent puts followed by a read of a value none of them wrote. Porcupine
// must try every subset of the puts before it can say illegal.
func TestTimeoutIsUnknown(t *testing.T) {
	var ops []h
	for i := 0; i < 40; i++ {
		ops = append(ops, put(i, "x", int64(i), 0, 1000))
		ops = append(ops, get(i+100, "x", i64(int64(i)), int64(i), 1000))
	}
	ops = append(ops, get(999, "x", i64(-1), 2000, 2010))
	o := check(t, ops, exitUnknown, "-timeout", "100ms")
	if o.elapsed > 10*time.Second {
		t.Fatalf("timeout not honoured: %v", o.elapsed)
	}
	if !strings.Contains(o.stderr, "unknown") {
		t.Fatalf("stderr should explain: %s", o.stderr)
	}
}

// simulate produces a linearizable history: each operation takes effect
// atomically at a random instant inside its [call, return] interval, and some
// return nothing (pending) though they may have taken effect.
func simulate(r *rand.Rand, nOps, nKeys, nClients int) []h {
	type event struct {
		at int64
		op int
	}
	ops := make([]h, nOps)
	clientFree := make([]int64, nClients)
	var events []event
	for i := range ops {
		c := r.Intn(nClients)
		call := clientFree[c] + int64(r.Intn(50))
		ret := call + 1 + int64(r.Intn(200))
		clientFree[c] = ret + 1
		k := fmt.Sprintf("k%d", r.Intn(nKeys))
		var op h
		switch r.Intn(4) {
		case 0:
			op = h{Op: "put", Value: i64(int64(r.Intn(5)))}
		case 1:
			op = h{Op: "get"}
		case 2:
			op = h{Op: "del"}
		default:
			op = h{Op: "cas", Value: i64(int64(r.Intn(5)))}
			if r.Intn(3) > 0 {
				op.Expect = i64(int64(r.Intn(5)))
			}
		}
		op.Client, op.Key, op.Call, op.Return = c, k, call, i64(ret)
		ops[i] = op
		events = append(events, event{call + r.Int63n(ret-call+1), i})
	}
	sort.Slice(events, func(i, j int) bool { return events[i].at < events[j].at })
	store := map[string]int64{}
	for _, ev := range events {
		op := &ops[ev.op]
		cur, present := store[op.Key]
		switch op.Op {
		case "put":
			store[op.Key] = *op.Value
			op.Ok = b(true)
		case "get":
			if present {
				op.Output = i64(cur)
			}
		case "del":
			delete(store, op.Key)
			op.Ok = b(present)
		case "cas":
			match := present == (op.Expect != nil) && (!present || cur == *op.Expect)
			if match {
				store[op.Key] = *op.Value
			}
			op.Ok = b(match)
		}
	}
	for i := range ops {
		if r.Intn(50) == 0 {
			ops[i] = pending(ops[i]) // it took effect, but nobody heard
		}
	}
	return ops
}

func TestRandomLinearizableHistories(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for round := 0; round < 20; round++ {
		ops := simulate(r, 300, 3, 6)
		check(t, ops, exitOk)
		// Corrupt one completed get to read a value nobody wrote.
		for i := range ops {
			if ops[i].Op == "get" && ops[i].Return != nil {
				ops[i].Output = i64(1000)
				break
			}
		}
		check(t, ops, exitIllegal)
	}
}

func TestLargeHistoryIsFast(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	ops := simulate(r, 100000, 1000, 32)
	o := check(t, ops, exitOk)
	if o.sum.Keys != 1000 {
		t.Fatalf("keys %d, want 1000", o.sum.Keys)
	}
	t.Logf("100000 ops over 1000 keys: %v", o.elapsed)
	if o.elapsed > 30*time.Second {
		t.Fatalf("too slow: %v", o.elapsed)
	}
}

// TestBinaryExitCodes runs the real binary (this test executable, re-entered
// through main) to check exit statuses and stdin/file input end to end.
func TestBinaryExitCodes(t *testing.T) {
	if os.Getenv("LINCHECK_RUN_MAIN") == "1" {
		return
	}
	dir := t.TempDir()
	okFile := filepath.Join(dir, "ok.jsonl")
	if err := os.WriteFile(okFile, []byte(encode(t, []h{put(0, "x", 1, 0, 10), get(1, "x", i64(1), 20, 30)})), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		args  []string
		stdin string
		code  int
	}{
		{"file ok", []string{okFile}, "", 0},
		{"stdin illegal", []string{"-"}, encode(t, []h{put(0, "x", 1, 0, 10), get(1, "x", nil, 20, 30)}), 1},
		{"stdin default", nil, encode(t, []h{put(0, "x", 1, 0, 10)}), 0},
		{"bad json", nil, "{\"client\": 0,\n", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestMainProcess$", "--"}, c.args...)...)
			cmd.Env = append(os.Environ(), "LINCHECK_RUN_MAIN=1")
			cmd.Stdin = strings.NewReader(c.stdin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.code, stdout.String(), stderr.String())
			}
		})
	}
}

// TestMainProcess is the child side of TestBinaryExitCodes.
func TestMainProcess(t *testing.T) {
	if os.Getenv("LINCHECK_RUN_MAIN") != "1" {
		t.Skip("child process only")
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(run(args, os.Stdin, os.Stdout, os.Stderr))
}
