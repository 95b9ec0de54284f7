package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// goTrace is a Go execution trace being taken over one phase, with
// BENCH_TRACE=1: where a slow claim's milliseconds went inside a process
// (running, waiting for a CPU, for the network, for the collector), which
// a CPU profile cannot tell.
type goTrace struct {
	name string
	done chan error
}

// tracing says whether BENCH_TRACE=1 asks for execution traces.
func tracing() bool { return os.Getenv("BENCH_TRACE") == "1" }

// startControllerTrace asks the controller's pprof server at addr for an
// execution trace of seconds, written to .work/bench-profiles/<name>.trace;
// nil unless tracing(). The trace runs for its seconds whatever the phase
// does: size it to the phase.
func startControllerTrace(t *testing.T, addr, name string, seconds int) *goTrace {
	t.Helper()
	if !tracing() {
		return nil
	}
	return startTrace(http.DefaultClient, fmt.Sprintf("http://%s/debug/pprof/trace?seconds=%d", addr, seconds), name, seconds)
}

// startAPIServerTrace is startControllerTrace for the API server cfg
// reaches (its /debug/pprof, as cfg's user), written to
// apiserver-<name>.trace.
func startAPIServerTrace(t *testing.T, cfg *rest.Config, name string, seconds int) *goTrace {
	t.Helper()
	if !tracing() || cfg == nil {
		return nil
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return startTrace(hc, fmt.Sprintf("%s/debug/pprof/trace?seconds=%d", cfg.Host, seconds), "apiserver-"+name, seconds)
}

func startTrace(hc *http.Client, url, name string, seconds int) *goTrace {
	gt := &goTrace{name: name, done: make(chan error, 1)}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(seconds)*time.Second+time.Minute)
		defer cancel()
		body, err := httpGetWith(ctx, hc, url)
		if err == nil {
			_, err = saveProfileFile(name+".trace", body)
		}
		gt.done <- err
	}()
	return gt
}

// wait returns once the trace is written, and logs where (or why not).
func (gt *goTrace) wait(t *testing.T) {
	t.Helper()
	if gt == nil {
		return
	}
	if err := <-gt.done; err != nil {
		t.Logf("trace %s: %v", gt.name, err)
		return
	}
	t.Logf("trace %s: %s", gt.name, filepath.Join(profileDir, gt.name+".trace"))
}

// pacedTraceSeconds is how long a trace of a paced series of n claims
// runs: about 230 ms a claim, its pause included.
func pacedTraceSeconds(n int) int { return n/4 + 2 }
