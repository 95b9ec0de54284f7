// Package bench measures the controller on a local cluster and prints one
// JSON document: the floor (N Sandboxes, their Pods, Services, pod-name
// annotations and one status write each, made by one client before the
// controller starts), a raw lower bound (Pods and Services created
// directly), cold create, a metadata-only touch, suspend, resume and
// delete of N Sandboxes, each as a ratio to the floor with the controller's
// API requests by verb (the watches it opens as WATCH) and its writes per
// Sandbox (all but GET, LIST and WATCH), CPU-seconds, RSS and a
// CPU and heap profile (.work/bench-profiles/), what the API server served
// and sent etcd over it (as over the floor's cold create), the floor's cold
// create measured again once the rest is done and the controller stopped
// (floor_after, and cold create's ratio to both floors' mean), the controller's resident
// memory at start and once the run is over and it has been quiet for
// memorySettle, split into anon and file pages
// (controller_start_rss_split_mb, controller_end_rss_mb); suspend and resume also as
// ratios to their own floors (the floor's Sandboxes suspended and resumed
// by the same client), and warm claims, at once and paced, then more
// bursts at once, each followed by another paced series
// (BENCH_CLAIM_BURSTS, 3 in all, with the ratios of the bursts' median
// p99s and of the paced series' median p99s), next to the N
// Running Sandboxes (before they are deleted), as ratios to a claims floor
// (a client adopting a member that carries a Ready member's annotation and
// status, and writing the claim's annotations and status) measured twice:
// next to the floor's own N Running Sandboxes (floor_next_to_n) and on an
// empty cluster (floor), and to a claims floor with refill on an empty
// cluster (floor_with_refill: the same client also relabels the taken
// member's Pod, records the claim's SandboxAdopted Event and makes a new
// member in its place, the rest of what the contract writes for a claim
// served from a warm pool) with that floor's own ratio to the claims
// floor (floor_with_refill_*_ratio_to_floor: what any implementation of
// the contract pays beyond the claims floor), with the sizes of the
// objects the claims change and, with BENCH_APISERVER_PROFILE=1, the API server's CPU profile of each
// burst (with BENCH_TRACE=1, Go execution traces of the controller and the
// API server over the first paced series, and of the API server over the
// floors'). The bench runs the controller with GODEBUG=gctrace=1, so each
// of its claims timelines says how the claims met its garbage
// collections, and the cluster's API server likewise, so every claims
// timeline, on either side, says how its claims met the API server's
// (apiserver_gc); each burst, on either side, says what the API server did
// on its own meanwhile (apiserver_own_work_per_burst: its collections, its
// repair loop's pass over every Service and IPAddress every three minutes,
// and its watch cache's consistency checks, each a list of one resource
// from etcd), and each paced series the same (paced_apiserver_own) with
// etcd's disk work (paced_etcd_disk: its backend commits and WAL fsyncs,
// and how many took over 8 ms). TestBenchDataplane measures the
// data plane on a local cluster with the stand-in kubelet: claim -> first
// command (SDK Create then Run, the SDK built as from a kubeconfig, paced
// and 50 at once, the bursts through the router in three rounds with the
// median of their ratios, by port-forward and
// through bin/sandbox-router, which checks the SDK's ServiceAccount token
// and its right to exec as for any tenant unless BENCH_DP_ROUTER_AUTH is
// none, and routes by claim: Create asks it for its claim's Sandbox; and
// through the same router with the SDK waiting for each claim's Ready by
// watch, router_watch, the A/B of that) as a ratio to claim Ready, to claim Ready plus
// one command on a runtime alone, and to claim Ready plus the first contact
// with a fresh Sandbox measured alone (its port-forward and first command:
// the reach floor), and commands per second as a ratio to sandbox-runtime
// processes reached without Kubernetes; each claim phase with the
// per-claim timeline of its claims (the SDK's matched to its spans) and
// what the phase cost each process and the API server. A pool member
// counts as ready there once the stand-in runs its runtime.
// TestBenchClaims, only when named, measures the claims alone on a fresh
// cluster: the claims floor, the claims floor with refill, then the
// controller, then (the controller stopped and its claims deleted) both
// floors again in the reverse order, with its ratios to both, measured
// before it and to each floor's mean around it (one floor measured twice
// in a run differed by up to half, either way).
// TestBenchRestart measures a controller restart with nothing changed (N
// Sandboxes over BENCH_NAMESPACES namespaces, each process's CPU over their
// cold create): the seconds until ready and until each Sandbox was
// reconciled, the reconciles and writes (0 is the goal), the new
// controller's CPU profile from its first moment, and each process's CPU
// and the API server's requests over the restart.
// TestBenchScale, only when named, measures what a large N is for (N
// Sandboxes over BENCH_NAMESPACES namespaces on both sides; cold create
// against the floor's, idle, claims next to N against both claims
// floors, each side's once its cluster is quiet or BENCH_QUIET_MAX has
// passed, memory per Sandbox, a
// restart) and leaves the rest out; the
// floor and the controller each run on a fresh cluster, so that nothing
// is deleted (at N=20000 the floor's cold create took 35 min here, and
// deleting its namespace would have taken over an hour).
// TestBenchE2B drives the router's E2B front door with the e2b SDK from npm
// (tests/e2b/bench.mjs, Node.js; skipped without it): Sandbox.create ->
// first commands.run output, paced and at once, as a ratio to claim Ready
// on the same pool, and commands.run('echo hi') against the legacy
// /execute through the same router.
// They run only under `make bench`; figures are reported, never asserted.
package bench
