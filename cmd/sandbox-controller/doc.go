// Command sandbox-controller is the controller manager: it hosts the
// reconcilers, the policy engine and the validating admission webhook of the
// agent-sandbox API. It is flags and wiring only; behaviour lives in apply/, render/ and
// policy/. Flag names and defaults match the public agent-sandbox controller,
// so existing deployments keep working; flags of its own are added, never
// changed. Without GOMEMLIMIT it sets the Go runtime's soft memory limit
// from its container's memory limit, and without GOGC the collector's
// target to --gc-percent (memlimit.go); once quiet after starting or a
// wave, it collects the heap and returns its free pages
// (--release-free-heap) and, on Linux, unmaps the read-only pages of its
// own executable (--release-code-pages): quiet.go. In a pause of the
// work that has used a quarter of the collector's headroom or more, it collects
// then, not in the next burst (--idle-collection): idlegc.go. Its Events go through
// one broadcaster of its own whose sink waits for the controller's writes
// and while claims are being served (apply/eventgate, --event-quiet,
// --event-hold-max) and counts an Event refused because
// its namespace is being deleted as sent: events.go. Its logger encodes the
// fields a logger is given (each reconcile's object and ID) only once that
// logger writes an entry: logging.go.
package main
