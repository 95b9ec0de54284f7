package tests

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentsandbox/reconciler/localcluster"
)

// FreeAddr returns a loopback address with a port that is free right now.
func FreeAddr() (string, error) { return localcluster.FreeAddr() }

// WaitReady polls http://<probe>/readyz until it answers 200, the process
// reports its exit on exited, or timeout passes.
func WaitReady(probe string, exited <-chan error, timeout time.Duration) error {
	return localcluster.WaitReady(probe, exited, timeout)
}

// ScrapeMetrics reads a Prometheus text endpoint (http://host:port/metrics)
// into series -> value, each series spelled name{labels} as the format
// prints it.
func ScrapeMetrics(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, nil
}

// MetricChanges returns after - before for every series starting with one
// of prefixes that changed.
func MetricChanges(before, after map[string]float64, prefixes ...string) map[string]float64 {
	out := map[string]float64{}
	for series, v := range after {
		for _, p := range prefixes {
			if strings.HasPrefix(series, p) {
				if d := v - before[series]; d != 0 {
					out[series] = d
				}
				break
			}
		}
	}
	return out
}

// ProcCPU reads what a process has used so far from /proc/<pid>/stat: CPU
// seconds (utime + stime, fields 14 and 15, in USER_HZ ticks of 10 ms) and
// minor page faults (field 10), counting fields from the first after the
// command's closing parenthesis (field 3).
func ProcCPU(pid int) (cpuSeconds float64, minorFaults int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	var f []string
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 {
		f = strings.Fields(string(b[i+1:]))
	}
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	minorFaults, _ = strconv.ParseInt(f[7], 10, 64)
	return (utime + stime) / 100, minorFaults, nil
}
