// Package filesystempb is the Go code buf generates from
// dataplane/envd/proto/filesystem/filesystem.proto: the messages of E2B's
// filesystem.Filesystem (the in-sandbox daemon's filesystem API);
// filesystempbconnect has its Connect handler and client. Written by make
// generate only; the service itself is package envd.
package filesystempb
