package bench

import (
	"context"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// etcdSlowMs is the bound above which etcdOwn counts a backend commit or
// a WAL fsync as slow: a claim's paced writes take 4-5 ms each, so a
// write that waits behind a slower commit or fsync is a tail.
const etcdSlowMs = 8

// etcdOwn reads the cluster's etcd /metrics once (the etcd process among
// clusterDir's, at its --listen-client-urls) and returns the disk work it
// has done so far: its backend commits ("backend_commits", their time in
// "backend_commit_us", those over etcdSlowMs "backend_commits_slow"), its
// WAL fsyncs ("wal_fsyncs", "wal_fsync_us", "wal_fsyncs_slow") and its
// collections ("gc_cycles"). A write waits for the WAL's fsync, and for
// a backend commit in progress; a series' difference tells whether the
// disk was busier beside one side's claims than beside the other's. Nil
// when etcd cannot be found or read.
func etcdOwn(clusterDir string) map[string]int64 {
	url := etcdMetricsURL(clusterDir)
	if url == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, err := httpGetWith(ctx, http.DefaultClient, url)
	if err != nil {
		return nil
	}
	return parseEtcdMetrics(string(body))
}

// etcdMetricsURL is the /metrics address of clusterDir's etcd, from the
// first of its --listen-client-urls; "" when there is none.
func etcdMetricsURL(clusterDir string) string {
	_, args := clusterProcess(clusterDir, "etcd")
	for _, a := range args {
		if urls, ok := strings.CutPrefix(a, "--listen-client-urls="); ok {
			first, _, _ := strings.Cut(urls, ",")
			return strings.TrimSuffix(first, "/") + "/metrics"
		}
	}
	return ""
}

// parseEtcdMetrics is etcdOwn's reading of etcd's /metrics.
func parseEtcdMetrics(metrics string) map[string]int64 {
	out := map[string]int64{}
	hists := []struct{ metric, key string }{
		{"etcd_disk_backend_commit_duration_seconds", "backend_commit"},
		{"etcd_disk_wal_fsync_duration_seconds", "wal_fsync"},
	}
	fast := map[string]int64{}
	slowBound := strconv.FormatFloat(etcdSlowMs/1000.0, 'g', -1, 64)
	for line := range strings.Lines(metrics) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		v, err := strconv.ParseFloat(value, 64)
		if !ok || err != nil {
			continue
		}
		if name == "go_gc_duration_seconds_count" {
			out["gc_cycles"] = int64(v)
		}
		for _, h := range hists {
			switch name {
			case h.metric + "_count":
				out[h.key+"s"] = int64(v)
			case h.metric + "_sum":
				out[h.key+"_us"] = int64(v * 1e6)
			case h.metric + `_bucket{le="` + slowBound + `"}`:
				fast[h.key] = int64(v)
			}
		}
	}
	for _, h := range hists {
		if n, ok := out[h.key+"s"]; ok {
			if f, ok := fast[h.key]; ok {
				out[h.key+"s_slow"] = n - f
			}
		}
	}
	return out
}

func TestParseEtcdMetrics(t *testing.T) {
	metrics := `# HELP etcd_disk_backend_commit_duration_seconds ...
etcd_disk_backend_commit_duration_seconds_bucket{le="0.004"} 90
etcd_disk_backend_commit_duration_seconds_bucket{le="0.008"} 95
etcd_disk_backend_commit_duration_seconds_bucket{le="+Inf"} 100
etcd_disk_backend_commit_duration_seconds_sum 0.5
etcd_disk_backend_commit_duration_seconds_count 100
etcd_disk_wal_fsync_duration_seconds_bucket{le="0.008"} 40
etcd_disk_wal_fsync_duration_seconds_sum 0.25
etcd_disk_wal_fsync_duration_seconds_count 41
go_gc_duration_seconds_count 7
`
	got := parseEtcdMetrics(metrics)
	want := map[string]int64{
		"backend_commits": 100, "backend_commit_us": 500000, "backend_commits_slow": 5,
		"wal_fsyncs": 41, "wal_fsync_us": 250000, "wal_fsyncs_slow": 1, "gc_cycles": 7,
	}
	if !maps.Equal(got, want) {
		t.Errorf("parseEtcdMetrics = %v, want %v", got, want)
	}
}
