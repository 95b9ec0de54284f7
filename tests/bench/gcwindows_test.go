package bench

import (
	"bufio"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// GCOverlap is how a timeline's claims met the controller's garbage
// collections: each cycle's concurrent mark runs beside the reconciles,
// takes part of the CPU and makes goroutines that allocate help it, and
// with the N Sandboxes cached each cycle has a large heap to mark. The
// cycles are read from the controller's own runtime trace lines
// (GODEBUG=gctrace=1, which the bench sets), on the bench's clock by the
// process's start.
type GCOverlap struct {
	// Cycles counts the collections that began between the first claim's
	// create and the last claim's Ready.
	Cycles int `json:"cycles"`
	// CycleMs is those cycles' wall time, start to end of mark termination.
	CycleMs Quantiles `json:"cycle_ms"`
	// ClaimsBesideGC counts the claims during which (create sent to
	// Ready) a cycle ran; BesideMs and ApartMs are the sent-to-Ready times
	// of those claims and of the others.
	ClaimsBesideGC int       `json:"claims_beside_gc"`
	BesideMs       Quantiles `json:"beside_gc_ms"`
	ApartMs        Quantiles `json:"apart_from_gc_ms"`
	// Met counts every collection that ran between the first claim's
	// create and the last claim's Ready, those begun before the first
	// too; Forced those of them a call began (runtime.GC: the
	// controller's release of free heap once quiet, or a heap profile's
	// gc=1), not the heap's growth.
	Met    int `json:"cycles_met"`
	Forced int `json:"forced_cycles_met"`
}

// gcWindow is one collection's span on the bench's clock, and whether a
// call forced it (gctrace's "(forced)").
type gcWindow struct {
	from, to time.Time
	forced   bool
}

// gcTraceLine matches the start of a gctrace line: the cycle, its start in
// seconds since the process started, and the wall clock of its three
// phases (sweep termination, concurrent mark, mark termination) in ms.
var gcTraceLine = regexp.MustCompile(`^gc \d+ @([0-9.]+)s \d+%: ([0-9.]+)\+([0-9.]+)\+([0-9.]+) ms clock`)

// readGCWindows returns the collections of the complete gctrace lines in
// r, the process having started at started, and how many bytes the
// complete lines it read take (a line still being written is left for the
// next read).
func readGCWindows(r io.Reader, started time.Time) ([]gcWindow, int64) {
	var out []gcWindow
	var read int64
	br := bufio.NewReaderSize(r, 64*1024)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return out, read // io.EOF with a partial line or none
		}
		read += int64(len(line))
		if w, ok := parseGCTrace(line, started); ok {
			out = append(out, w)
		}
	}
}

// parseGCTrace is the collection of one gctrace line.
func parseGCTrace(line string, started time.Time) (gcWindow, bool) {
	m := gcTraceLine.FindStringSubmatch(line)
	if m == nil {
		return gcWindow{}, false
	}
	var f [4]float64
	for i := range f {
		v, err := strconv.ParseFloat(m[i+1], 64)
		if err != nil {
			return gcWindow{}, false
		}
		f[i] = v
	}
	from := started.Add(time.Duration(f[0] * float64(time.Second)))
	return gcWindow{from: from, to: from.Add(time.Duration((f[1] + f[2] + f[3]) * float64(time.Millisecond))),
		forced: strings.Contains(line, "(forced)")}, true
}

// gcWindows are the collections the controller's log shows so far, read
// on from where the last call stopped (the log grows large at N=20000);
// what could not be read is left out.
func (c *controller) gcWindows() []gcWindow {
	c.gcMu.Lock()
	defer c.gcMu.Unlock()
	if c.gcRead < c.logFrom {
		c.gcRead = c.logFrom
	}
	ws, n := readGCWindowsAt(c.log, c.gcRead, c.started)
	c.gcSeen, c.gcRead = append(c.gcSeen, ws...), c.gcRead+n
	return c.gcSeen
}

// readGCWindowsAt is readGCWindows of the log at path from offset on;
// nothing, and 0 bytes read, when it cannot be read.
func readGCWindowsAt(path string, offset int64, started time.Time) ([]gcWindow, int64) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, 0
	}
	return readGCWindows(f, started)
}

// withGCTrace returns env with gctrace=1 added to its GODEBUG (kept as it
// is otherwise).
func withGCTrace(env []string) []string {
	out := make([]string, 0, len(env)+1)
	debug := "gctrace=1"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			if v != "" {
				debug = v + "," + debug
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, "GODEBUG="+debug)
}

// gcOverlap is the GCOverlap of the claims named (k.mu held), nil
// without windows to read (read nil: the floors' claims, for the
// controller's collections).
func (k *claimClock) gcOverlap(names []string, read func() []gcWindow, windows []gcWindow) *GCOverlap {
	if read == nil {
		return nil
	}
	first, last := k.firstSent(names), time.Time{}
	for _, name := range names {
		if r := k.readyAt[name]; r.After(last) {
			last = r
		}
	}
	var in []gcWindow
	var cycles []float64
	for _, w := range windows {
		if w.to.After(first) && w.from.Before(last) {
			in = append(in, w)
			if !w.from.Before(first) {
				cycles = append(cycles, ms(w.to.Sub(w.from)))
			}
		}
	}
	o := &GCOverlap{Cycles: len(cycles), CycleMs: quantilesOf(cycles), Met: len(in)}
	for _, w := range in {
		if w.forced {
			o.Forced++
		}
	}
	var beside, apart []float64
	for _, name := range names {
		sent, ready := k.sent[name], k.readyAt[name]
		if sent.IsZero() || ready.IsZero() {
			continue
		}
		took := ms(ready.Sub(sent))
		if gcMs(in, sent, ready) > 0 {
			o.ClaimsBesideGC++
			beside = append(beside, took)
		} else {
			apart = append(apart, took)
		}
	}
	o.BesideMs, o.ApartMs = quantilesOf(beside), quantilesOf(apart)
	return o
}

// gcMs is how many ms of from..to the windows cover.
func gcMs(windows []gcWindow, from, to time.Time) float64 {
	var d time.Duration
	for _, w := range windows {
		if a, b := later(w.from, from), earlier(w.to, to); b.After(a) {
			d += b.Sub(a)
		}
	}
	return ms(d)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// TestReadGCWindows: gctrace lines (forced or not) become windows on the
// bench's clock, the other lines of the log are skipped.
func TestReadGCWindows(t *testing.T) {
	started := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	log := strings.Join([]string{
		`{"level":"info","msg":"starting"}`,
		`gc 1 @0.011s 2%: 0.012+1.5+0.003 ms clock, 0.025+0.12/1.0/0.5+0.007 ms cpu, 3->3->1 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P`,
		`gc 17 @12.500s 3%: 0.5+120+0.5 ms clock, 1.0+10/100/0+1.0 ms cpu, 400->410->260 MB, 402 MB goal, 2 MB stacks, 1 MB globals, 2 P (forced)`,
		`gc x @1s 1%: broken`,
	}, "\n")
	ws, n := readGCWindows(strings.NewReader(log+"\ngc 18 @13.0s 1%: 0.1+"), started)
	if len(ws) != 2 || n != int64(len(log)+1) {
		t.Fatalf("%d windows, %d bytes read; want 2, %d (the line being written left)", len(ws), n, len(log)+1)
	}
	if got := ws[1].from.Sub(started); got != 12500*time.Millisecond {
		t.Fatalf("second starts %v after start; want 12.5s", got)
	}
	if got := ws[1].to.Sub(ws[1].from); got != 121*time.Millisecond {
		t.Fatalf("second lasts %v; want 121ms", got)
	}
	if ws[0].forced || !ws[1].forced {
		t.Fatalf("forced %v, %v; want false, true", ws[0].forced, ws[1].forced)
	}
}

// TestGCOverlap: a claim counts as beside a collection when one ran while
// it was served; cycles count only those that began in the timeline.
func TestGCOverlap(t *testing.T) {
	k, at := threeClaims(290)
	k.gc = func() []gcWindow {
		return []gcWindow{{at(-100), at(-50), false}, {at(250), at(300), false}, {at(1000), at(1100), false}}
	}
	o := k.gcOverlap([]string{"a", "b", "c"}, k.gc, k.gc())
	if o.Cycles != 1 || o.ClaimsBesideGC != 1 || o.CycleMs.P50 != 50 || o.Met != 1 || o.Forced != 0 {
		t.Fatalf("%+v; want 1 cycle of 50 ms, met, not forced, 1 claim beside it", o)
	}
	// A forced cycle begun before the first claim and still running is
	// met, not counted among the cycles begun in the timeline.
	early := []gcWindow{{at(-100), at(20), true}}
	if o := k.gcOverlap([]string{"a", "b", "c"}, k.gc, early); o.Cycles != 0 || o.Met != 1 || o.Forced != 1 || o.ClaimsBesideGC == 0 {
		t.Fatalf("%+v; want 0 begun, 1 met and forced, claims beside it", o)
	}
	if o.BesideMs.P50 != 90 || o.ApartMs.P99 != 20 {
		t.Fatalf("beside %v, apart %v; want 90 ms and 20 ms", o.BesideMs, o.ApartMs)
	}
	if got := gcMs(k.gc(), at(200), at(290)); got != 40 {
		t.Fatalf("b's time beside a collection: %v ms; want 40", got)
	}
	if got := withGCTrace([]string{"A=1", "GODEBUG=madvdontneed=1"}); strings.Join(got, " ") != "A=1 GODEBUG=madvdontneed=1,gctrace=1" {
		t.Fatalf("withGCTrace: %v", got)
	}
	if got := withGCTrace([]string{"A=1"}); strings.Join(got, " ") != "A=1 GODEBUG=gctrace=1" {
		t.Fatalf("withGCTrace: %v", got)
	}
}
