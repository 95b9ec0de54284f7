package bench

import (
	"maps"
	"testing"
)

// TestAPIServerOwnWork reads kube-apiserver's own work from a /metrics
// body in the format kube-apiserver 1.37 prints:
// the collector's count and CPU, the ClusterIP repair's two queues among
// other queues of the same metric, and the watch cache's consistency
// checks by resource, whatever they found.
func TestAPIServerOwnWork(t *testing.T) {
	body := `# HELP go_gc_duration_seconds A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0"} 2.1e-05
go_gc_duration_seconds_sum 0.512
go_gc_duration_seconds_count 417
go_cpu_classes_gc_mark_assist_cpu_seconds_total 0.041998017
go_cpu_classes_gc_total_cpu_seconds_total 12.288839933
workqueue_adds_total{name="DiscoveryController"} 12
workqueue_adds_total{name="ipaddresses"} 40021
workqueue_adds_total{name="services"} 60003
workqueue_adds_total{name="services_something_else"} 5
apiserver_storage_consistency_checks_total{group="",resource="pods",status="success"} 3
apiserver_storage_consistency_checks_total{group="",resource="pods",status="failure"} 1
apiserver_storage_consistency_checks_total{group="agents.x-k8s.io",resource="sandboxes",status="success"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="services",scope="cluster",subresource="",verb="LIST",version="v1"} 7
`
	want := map[string]int64{"gc_cycles": 417, "gc_cpu_ms": 12288, "repair_queued ipaddresses": 40021, "repair_queued services": 60003,
		"consistency_checks pods": 4, "consistency_checks sandboxes": 2}
	if got := apiServerOwnWork(body); !maps.Equal(got, want) {
		t.Fatalf("apiServerOwnWork = %v, want %v", got, want)
	}
	if got := apiServerOwnWork(""); len(got) != 0 {
		t.Fatalf("apiServerOwnWork of nothing = %v, want nothing", got)
	}
}
