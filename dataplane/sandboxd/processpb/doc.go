// Package processpb is the Go code buf generates from
// dataplane/sandboxd/proto/process/v1/process.proto: the messages and the
// gRPC client and server of upstream's process.v1.ProcessService. It is
// written by make generate only (make verify fails on a hand edit); the
// service itself is package sandboxd.
package processpb
