// Package envdpb holds the Go code buf generates from dataplane/envd/proto:
// processpb (process.Process) and filesystempb (filesystem.Filesystem), each
// with its Connect handler and client in a ...connect subpackage. They are
// written by make generate only (make verify fails on a hand edit); the
// services themselves are package envd.
package envdpb
