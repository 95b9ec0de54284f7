package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentsandbox/reconciler/tests/cluster"
)

// apiServerGCLog reads kube-apiserver's collections from its log, where
// the bench's cluster has it trace them (cluster.Options.APIServerGCTrace):
// each cycle marks with a quarter of its CPU and has the requests that
// allocate help, so a claim served beside one is slower on either side,
// and the more the API server allocates (a pool's refill) the more cycles
// there are.
type apiServerGCLog struct {
	mu      sync.Mutex
	pid     int
	started time.Time
	read    int64
	seen    []gcWindow
}

// apiServerGC is the bench cluster's (clusterDirOf) apiServerGCLog.
var apiServerGC apiServerGCLog

// windows are the collections of the running kube-apiserver so far, read
// on from where the last call stopped; those of an API server that ran
// before it are dropped. None when it cannot be found.
func (l *apiServerGCLog) windows() []gcWindow {
	l.mu.Lock()
	defer l.mu.Unlock()
	pid, _ := clusterProcess(clusterDirOf, "kube-apiserver")
	if pid == 0 {
		return l.seen
	}
	path := filepath.Join(clusterDirOf, "logs", "kube-apiserver.log")
	if pid != l.pid {
		started, ok := processStart(pid)
		if !ok {
			return l.seen
		}
		l.pid, l.started, l.read, l.seen = pid, started, 0, nil
	}
	ws, n := readGCWindowsAt(path, l.read, l.started)
	// A log the restarted API server appends to still holds the lines of
	// the one before it: only cycles after this one started are its own.
	for _, w := range ws {
		if !w.from.Before(l.started) {
			l.seen = append(l.seen, w)
		}
	}
	l.read += n
	return l.seen
}

// clusterProcess is clusterDir's process whose executable is named
// name: its pid and command line; 0 and nil when there is none.
func clusterProcess(clusterDir, name string) (int, []string) {
	for _, pid := range cluster.Processes(clusterDir) {
		if args := processArgs(pid); args != nil && filepath.Base(args[0]) == name {
			return pid, args
		}
	}
	return 0, nil
}

// processArgs is process pid's command line, nil when it cannot be read.
func processArgs(pid int) []string {
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return nil
	}
	return strings.Split(string(cmdline), "\x00")
}

// processStart is when process pid started, on this host's wall clock, to
// the kernel's clock tick (10 ms): its start in ticks after boot
// (/proc/<pid>/stat) set against the time since boot now.
func processStart(pid int) (time.Time, bool) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return time.Time{}, false
	}
	// Fields after the command's closing parenthesis; starttime is the
	// 22nd field of the line, the 20th after it.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return time.Time{}, false
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 {
		return time.Time{}, false
	}
	ticks, err := strconv.ParseInt(fields[19], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	var boot unix.Timespec
	now := time.Now()
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot); err != nil {
		return time.Time{}, false
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return now.Add(time.Duration(ticks)*tick - time.Duration(boot.Nano())), true
}

// initialized is when this package's variables were initialized, a few
// ms after the test binary started.
var initialized = time.Now()

// TestProcessStart: this process started no later than its package's
// initialization (within the clock tick) and not long before it.
func TestProcessStart(t *testing.T) {
	started, ok := processStart(os.Getpid())
	if !ok {
		t.Fatal("no start time for this process")
	}
	if d := initialized.Sub(started); d < -20*time.Millisecond || d > 5*time.Second {
		t.Fatalf("started %v before its package's initialization", d)
	}
}
