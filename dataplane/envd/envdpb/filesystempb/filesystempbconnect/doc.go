// Package filesystempbconnect is the Connect handler and client
// protoc-gen-connect-go generates for E2B's filesystem.Filesystem
// (dataplane/envd/proto/filesystem). Written by make generate only.
package filesystempbconnect
