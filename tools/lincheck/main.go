// Command lincheck checks a recorded Tessera key-value history for
// linearizability with Porcupine, one register per key.
//
// Usage: lincheck [-timeout 60s] [-viz out.html] [history.jsonl | -]
//
// Exit status: 0 linearizable, 1 not linearizable, 2 bad input, timeout or
// unknown. See README.md for the input format.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

const (
	exitOk      = 0
	exitIllegal = 1
	exitUnknown = 2
)

type summary struct {
	Ops       int    `json:"ops"`
	Keys      int    `json:"keys"`
	Result    string `json:"result"`
	ElapsedMs int64  `json:"elapsed_ms"`
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lincheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 60*time.Second, "give up after this long and exit 2 (0 = no limit)")
	vizPath := fs.String("viz", "", "if the history is not linearizable, write Porcupine's HTML visualization of the failing keys here")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: lincheck [-timeout 60s] [-viz out.html] [history.jsonl | -]")
		fmt.Fprintln(stderr, "Checks a JSON-lines key-value history for linearizability (register per key).")
		fmt.Fprintln(stderr, "Exit status: 0 linearizable, 1 not linearizable, 2 bad input, timeout or unknown.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitUnknown // includes -h: no check was run
	}
	if fs.NArg() > 1 {
		fmt.Fprintln(stderr, "lincheck: at most one history file")
		fs.Usage()
		return exitUnknown
	}
	if *timeout < 0 {
		fmt.Fprintln(stderr, "lincheck: -timeout must not be negative")
		return exitUnknown
	}

	start := time.Now()
	in := stdin
	source := "stdin"
	if fs.NArg() == 1 && fs.Arg(0) != "-" {
		source = fs.Arg(0)
		f, err := os.Open(source)
		if err != nil {
			fmt.Fprintf(stderr, "lincheck: %v\n", err)
			return exitUnknown
		}
		defer f.Close()
		in = f
	}
	h, err := parseHistory(in)
	if err != nil {
		fmt.Fprintf(stderr, "lincheck: %s: %v\n", source, err)
		return exitUnknown
	}

	res := porcupine.CheckOperationsTimeout(kvModel, h.ops, *timeout)

	var badKeys []string
	var undecided []string
	if res == porcupine.Illegal {
		// Porcupine stops at the first illegal partition; find every
		// failing key, with a fresh budget of -timeout.
		badKeys, undecided = illegalKeys(h.ops, *timeout)
	}
	sum := summary{Ops: h.total, Keys: h.keys, ElapsedMs: time.Since(start).Milliseconds()}
	switch res {
	case porcupine.Ok:
		sum.Result = "ok"
	case porcupine.Illegal:
		sum.Result = "illegal"
	default:
		sum.Result = "unknown"
	}
	line, _ := json.Marshal(sum)
	fmt.Fprintln(stdout, string(line))

	switch res {
	case porcupine.Ok:
		return exitOk
	case porcupine.Illegal:
		quoted := make([]string, len(badKeys))
		for i, k := range badKeys {
			quoted[i] = strconv.Quote(k)
		}
		fmt.Fprintf(stderr, "lincheck: NOT linearizable: %d key(s): %s\n", len(badKeys), strings.Join(quoted, ", "))
		if len(undecided) > 0 {
			fmt.Fprintf(stderr, "lincheck: %d other key(s) could not be decided within -timeout\n", len(undecided))
		}
		if *vizPath != "" && len(badKeys) > 0 {
			if err := writeViz(h.ops, badKeys, *timeout, *vizPath); err != nil {
				fmt.Fprintf(stderr, "lincheck: visualization: %v\n", err)
			} else {
				fmt.Fprintf(stderr, "lincheck: visualization written to %s\n", *vizPath)
			}
		}
		return exitIllegal
	default:
		fmt.Fprintf(stderr, "lincheck: unknown: no violation found, but the check did not finish within -timeout %v\n", *timeout)
		return exitUnknown
	}
}

// illegalKeys checks each key's sub-history on its own, in parallel, and
// returns the keys found illegal and those left undecided by the timeout.
func illegalKeys(ops []porcupine.Operation, timeout time.Duration) (illegal, undecided []string) {
	parts := partitionByKey(ops)
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	results := make([]porcupine.CheckResult, len(parts))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				var left time.Duration
				if timeout > 0 {
					left = time.Until(deadline)
					if left <= 0 {
						results[i] = porcupine.Unknown
						continue
					}
				}
				results[i] = porcupine.CheckOperationsTimeout(kvModel, parts[i], left)
			}
		}()
	}
	for i := range parts {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, r := range results {
		key := parts[i][0].Input.(input).key
		switch r {
		case porcupine.Illegal:
			illegal = append(illegal, key)
		case porcupine.Unknown:
			undecided = append(undecided, key)
		}
	}
	sort.Strings(illegal)
	sort.Strings(undecided)
	return illegal, undecided
}

// writeViz renders the failing keys' sub-histories: one partition each.
func writeViz(ops []porcupine.Operation, keys []string, timeout time.Duration, path string) error {
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	var sub []porcupine.Operation
	for _, op := range ops {
		if want[op.Input.(input).key] {
			sub = append(sub, op)
		}
	}
	_, info := porcupine.CheckOperationsVerbose(kvModel, sub, timeout)
	return porcupine.VisualizePath(kvModel, info, path)
}
