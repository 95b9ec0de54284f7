package bench

import (
	"bufio"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentsandbox/reconciler/tests"
)

// controllerPID is the running controller's pid, for the CPU profile.
var controllerPID int

// controller is the real sandbox-controller binary under measurement.
type controller struct {
	cmd     *exec.Cmd
	metrics string
	// pprof is the address of its pprof server (--enable-pprof).
	pprof  string
	exited chan error
	// log is its log file, and logFrom the offset at which its lines
	// begin there (BENCH_CONTROLLER_LOG appends).
	log     string
	logFrom int64
	// The collections its log showed (gcWindows), read up to gcRead.
	gcMu   sync.Mutex
	gcSeen []gcWindow
	gcRead int64
	// started is when the process was started, ready when /readyz first
	// answered.
	started, ready time.Time
	stopOnce       sync.Once
}

// startController builds and starts the controller against the cluster with
// the production defaults (100 Sandbox workers), its pprof server on, and
// waits for /readyz.
func startController(t *testing.T, kubeconfig string) *controller {
	t.Helper()
	return startControllerThen(t, kubeconfig, nil)
}

// startControllerThen is startController, calling launched (when not nil)
// once the process has started, before the wait for /readyz: what is to
// watch the controller from its first moment (a restart's CPU profile)
// starts there.
func startControllerThen(t *testing.T, kubeconfig string, launched func(*controller)) *controller {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sandbox-controller")
	build := exec.Command("go", "build", "-tags", tests.BuildTags, "-o", bin, "./cmd/sandbox-controller")
	build.Dir = tests.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the controller: %v\n%s", err, out)
	}
	probe, metrics, pprof := freeAddr(t), freeAddr(t), freeAddr(t)
	logPath := filepath.Join(t.TempDir(), "controller.log")
	if p := os.Getenv("BENCH_CONTROLLER_LOG"); p != "" {
		logPath = p // kept after the run; each controller started appends
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	c := &controller{metrics: metrics, pprof: pprof, exited: make(chan error, 1), log: logPath}
	if st, err := logFile.Stat(); err == nil {
		c.logFrom = st.Size()
	}
	c.cmd = exec.Command(bin, "--kubeconfig", kubeconfig, "--leader-elect=false", "--extensions", "--enable-webhook=false",
		"--metrics-bind-address", metrics, "--health-probe-bind-address", probe,
		"--enable-pprof", "--pprof-bind-address", pprof)
	// Flags of a variant to compare with the defaults, say
	// BENCH_CONTROLLER_ARGS="--release-code-pages=false".
	c.cmd.Args = append(c.cmd.Args, strings.Fields(os.Getenv("BENCH_CONTROLLER_ARGS"))...)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	// Each collection's line in the log, for the claims' timelines
	// (GCOverlap): one line per cycle.
	c.cmd.Env = withGCTrace(os.Environ())
	c.started = time.Now()
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	controllerPID = c.cmd.Process.Pid
	go func() { c.exited <- c.cmd.Wait(); _ = logFile.Close() }()
	if launched != nil {
		launched(c)
	}
	if err := tests.WaitReady(probe, c.exited, time.Minute); err != nil {
		t.Fatalf("controller: %v (log %s)", err, logFile.Name())
	}
	c.ready = time.Now()
	return c
}

// series scrapes the controller's /metrics and returns the values of one
// metric by its label set (as printed, without braces).
func (c *controller) series(t *testing.T, name string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	c.scrape(t, func(line string) { addSample(out, name, line) })
	return out
}

// scrape calls each with every line of the controller's /metrics.
func (c *controller) scrape(t *testing.T, each func(line string)) {
	t.Helper()
	resp, err := http.Get("http://" + c.metrics + "/metrics")
	if err != nil {
		t.Fatalf("scraping the controller: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		each(sc.Text())
	}
}

// addSample adds to out the value of one line of Prometheus text when it is
// a sample of metric name, under its label set (as printed, without
// braces).
func addSample(out map[string]int64, name, line string) {
	if !strings.HasPrefix(line, name+"{") {
		return
	}
	i := strings.LastIndexByte(line, ' ')
	v, err := strconv.ParseFloat(line[i+1:], 64)
	if err != nil {
		return
	}
	out[strings.TrimSuffix(strings.TrimPrefix(line[:i], name+"{"), "}")] += int64(v)
}

// labelValue is the value of label key in a label set as printed
// (k="v",k2="v2"), "" when absent; values here hold no quotes or commas.
func labelValue(labels, key string) string {
	for l := range strings.SplitSeq(labels, ",") {
		if v, ok := strings.CutPrefix(l, key+`="`); ok {
			return strings.TrimSuffix(v, `"`)
		}
	}
	return ""
}

// requestsByVerb sums rest_client_requests_total by its method label, with
// the watches the controller opened (agent_sandbox_client_watches_total)
// taken out of GET and shown as WATCH: client-go counts both as GETs, and
// an idle controller still renews each informer's watch every few minutes.
func (c *controller) requestsByVerb(t *testing.T) map[string]int64 {
	out := map[string]int64{}
	for labels, v := range c.series(t, "rest_client_requests_total") {
		if m := labelValue(labels, "method"); m != "" {
			out[m] += v
		}
	}
	var watches int64
	for _, v := range c.series(t, "agent_sandbox_client_watches_total") {
		watches += v
	}
	if watches > 0 {
		out["WATCH"] = watches
		out["GET"] -= watches
	}
	return out
}

// rssMB reads the controller's resident set size now (VmRSS) and its peak
// so far (VmHWM), in MiB.
func (c *controller) rssMB() (now, peak float64) {
	status := c.procStatusMB()
	return status["VmRSS"], status["VmHWM"]
}

// procStatusMB reads the controller's /proc/<pid>/status: each field given
// in kB, in MiB (nil if it cannot be read).
func (c *controller) procStatusMB() map[string]float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(c.cmd.Process.Pid) + "/status")
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		key, v, ok := strings.Cut(line, ":")
		if kb, isKB := strings.CutSuffix(strings.TrimSpace(v), " kB"); ok && isKB {
			n, _ := strconv.ParseFloat(kb, 64)
			out[key] = n / 1024
		}
	}
	return out
}

// stop stops the controller (once: later calls do nothing).
func (c *controller) stop(t *testing.T) {
	c.stopOnce.Do(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-c.exited:
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Errorf("controller: %v", err)
			}
		case <-time.After(30 * time.Second):
			_ = c.cmd.Process.Kill()
			t.Error("controller did not stop within 30s of SIGTERM")
		}
	})
}

func freeAddr(t *testing.T) string {
	t.Helper()
	a, err := tests.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}
