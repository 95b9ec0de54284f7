// Package processpb is the Go code buf generates from
// dataplane/envd/proto/process/process.proto: the messages of E2B's
// process.Process (the in-sandbox daemon's process API); processpbconnect
// has its Connect handler and client. Written by make generate only; the
// service itself is package envd.
package processpb
