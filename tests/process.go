package tests

import (
	"io"
	"net/http"
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
