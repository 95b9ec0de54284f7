package bench

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// routerMetricsAddr is the running router's metrics address (startRouter).
var routerMetricsAddr string

// routerSamples reads the router's counters, histogram counts and sums
// (sandbox_router_*, one entry per series as printed), nil without a
// router or when they cannot be read.
func routerSamples() map[string]float64 {
	if routerMetricsAddr == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, err := httpGetWith(ctx, http.DefaultClient, "http://"+routerMetricsAddr+"/metrics")
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for line := range strings.Lines(string(body)) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "sandbox_router_") || strings.Contains(line, "_bucket{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// routerDiff is what changed in the router's series from before to after
// (those that did not change are left out).
func routerDiff(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = round2(d*1000) / 1000
		}
	}
	return out
}
