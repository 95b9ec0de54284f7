package bench

import (
	"maps"
	"testing"
)

// TestParseAPIServerMetrics reads a /metrics body in the format
// kube-apiserver 1.37 prints: requests served by verb and resource (with
// a subresource), requests to etcd by operation and resource, and its own
// work: the collector's count and CPU, the ClusterIP repair's two queues
// among other queues of the same metric, and the watch cache's
// consistency checks by resource, whatever they found.
func TestParseAPIServerMetrics(t *testing.T) {
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
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="services",scope="namespace",subresource="",verb="LIST",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="agents.x-k8s.io",resource="sandboxes",scope="resource",subresource="status",verb="PATCH",version="v1beta1"} 9
etcd_requests_total{group="agents.x-k8s.io",operation="update",resource="sandboxes"} 11
etcd_requests_total{group="",operation="get",resource="pods"} 4
`
	served, etcd, own := parseAPIServerMetrics(body)
	for _, c := range []struct {
		what      string
		got, want map[string]int64
	}{
		{"served", served, map[string]int64{"LIST services": 9, "PATCH sandboxes/status": 9}},
		{"etcd", etcd, map[string]int64{"update sandboxes": 11, "get pods": 4}},
		{"own", own, map[string]int64{"gc_cycles": 417, "gc_cpu_ms": 12288, "repair_queued ipaddresses": 40021,
			"repair_queued services": 60003, "consistency_checks pods": 4, "consistency_checks sandboxes": 2}},
	} {
		if !maps.Equal(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	served, etcd, own = parseAPIServerMetrics("")
	if len(served)+len(etcd)+len(own) != 0 {
		t.Fatalf("parseAPIServerMetrics of nothing = %v %v %v, want nothing", served, etcd, own)
	}
}
