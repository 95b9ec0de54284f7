// Package serving builds the controller's HTTP servers (admission and
// conversion webhooks, metrics, health probes, pprof) as manager runnables,
// each with read, write and idle timeouts and bounded headers; the webhook
// server caps request bodies and the bytes of bodies handled at once, and
// secure metrics answer only callers the API server authenticates and
// authorizes. It wires handlers to servers and must never hold controller
// logic.
package serving
