// Package memprobe measures the controller's memory quickly, without the
// local cluster `make bench` starts: TestMemProbe runs the real
// sandbox-controller binary (MEMPROBE_BIN) against an envtest API server
// with the stand-in kubelet, and logs its resident memory split into anon
// and file pages, its CPU and minor faults so far (/proc), its Go memory
// gauges and heap profiles (os.TempDir()/memprobe-<stage>.pprof) at start, with MEMPROBE_N Ready
// Sandboxes (default 500), after each is suspended and resumed
// (MEMPROBE_CYCLE set) and once they are deleted. MEMPROBE_ENV passes
// environment variables to the controller (GOGC=100, say) and
// MEMPROBE_GODEBUG a GODEBUG (memprofilerate=4096 for a finer heap
// profile than the default 512 KiB sampling); MEMPROBE_ARGS adds flags;
// MEMPROBE_LOG keeps the controller's log at that path. The figures are
// printed, never asserted; it runs only with AGENT_SANDBOX_MEMPROBE=1:
//
//	go build -tags fieldsv1string -o /tmp/sandbox-controller ./cmd/sandbox-controller
//	AGENT_SANDBOX_MEMPROBE=1 MEMPROBE_BIN=/tmp/sandbox-controller go test -v -run TestMemProbe ./tests/memprobe/
//
// The stand-in kubelet's Pods are smaller than a real kubelet's or kwok's
// (no container statuses), so per-Sandbox figures are lower than the
// bench's; use it to compare two builds, and the bench for the record.
package memprobe
