package bench

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Restart is the controller stopped and started again with nothing
// changed (N Running Sandboxes): how long until it is ready and until it
// has looked at every Sandbox once, and what it sent meanwhile. Nothing
// but reads (its lists and watches) is the goal: a restart that changes
// nothing writes nothing.
type Restart struct {
	// ReadySeconds is from the new process's start until /readyz answers.
	ReadySeconds float64 `json:"ready_seconds"`
	// ReconciledSeconds is from its start until its Sandbox controller
	// has finished N reconciles (controller_runtime_reconcile_total).
	ReconciledSeconds float64 `json:"all_reconciled_seconds"`
	// ByVerb is what it sent from its start until 3 s after that (settle),
	// and Writes the requests among them that are not GET, LIST or WATCH.
	ByVerb map[string]int64 `json:"controller_requests_by_verb"`
	Writes int64            `json:"controller_writes"`
	// CPUSeconds is its CPU time over the same span; RSSMB its resident
	// memory at the end of it.
	CPUSeconds float64 `json:"controller_cpu_seconds"`
	RSSMB      float64 `json:"controller_rss_mb"`
	// BeforeRSSMB and BeforePeakRSSMB are the stopped controller's
	// resident memory just before it was stopped and its peak, and
	// BeforeByVerb every request it had sent: the run's later figures
	// (delete_all, warm_claims, the end of the run) are the restarted
	// controller's.
	BeforeRSSMB     float64          `json:"stopped_controller_rss_mb"`
	BeforePeakRSSMB float64          `json:"stopped_controller_peak_rss_mb"`
	BeforeByVerb    map[string]int64 `json:"stopped_controller_requests_by_verb"`
}

// benchRestart stops ctrl, starts the controller again and measures it
// (Restart) until it has reconciled n Sandboxes. It returns the new
// controller.
func benchRestart(t *testing.T, ctrl *controller, kubeconfig string, n int) (*controller, Restart) {
	t.Helper()
	var r Restart
	r.BeforeRSSMB, r.BeforePeakRSSMB = ctrl.rssMB()
	r.BeforeByVerb = ctrl.requestsByVerb(t)
	ctrl.stop(t)
	next := startController(t, kubeconfig)
	r.ReadySeconds = round2(next.ready.Sub(next.started).Seconds())
	deadline := time.Now().Add(10 * time.Minute)
	for next.reconciles(t, "sandbox") < int64(n) {
		if time.Now().After(deadline) {
			t.Fatalf("the restarted controller reconciled %d of %d Sandboxes in 10 minutes", next.reconciles(t, "sandbox"), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.ReconciledSeconds = round2(time.Since(next.started).Seconds())
	settle()
	r.ByVerb = next.requestsByVerb(t)
	for verb, v := range r.ByVerb {
		switch verb {
		case "GET", "LIST", "WATCH":
		default:
			r.Writes += v
		}
	}
	r.CPUSeconds = round2(procCPU(next.cmd.Process.Pid))
	r.RSSMB, _ = next.rssMB()
	return next, r
}

// reconciles sums controller_runtime_reconcile_total of one controller
// (every result).
func (c *controller) reconciles(t *testing.T, name string) int64 {
	var sum int64
	for labels, v := range c.series(t, "controller_runtime_reconcile_total") {
		if strings.Contains(labels, `controller="`+name+`"`) {
			sum += v
		}
	}
	return sum
}

// idleSeconds is how long the idle phase lasts: BENCH_IDLE_SECONDS, or 10.
func idleSeconds(t *testing.T) time.Duration {
	s := 10
	if v := os.Getenv("BENCH_IDLE_SECONDS"); v != "" {
		var err error
		if s, err = strconv.Atoi(v); err != nil || s <= 0 {
			t.Fatalf("BENCH_IDLE_SECONDS=%q: want a positive integer", v)
		}
	}
	return time.Duration(s) * time.Second
}
