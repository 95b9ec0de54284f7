// Command hello claims a sandbox from a warm pool, runs a command in it and
// prints what it printed, then deletes the claim:
//
//	go run ./dataplane/client/examples/hello                      # echo hi in make run's python-pool
//	go run ./dataplane/client/examples/hello -router http://localhost:8080 uname -a
//
// With OTEL_EXPORTER_OTLP_ENDPOINT set (e.g. http://127.0.0.1:4318) the
// run is one trace, sent there: see docs/tracing.md.
package main
