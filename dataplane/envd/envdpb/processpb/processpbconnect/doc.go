// Package processpbconnect is the Connect handler and client protoc-gen-connect-go
// generates for E2B's process.Process (dataplane/envd/proto/process). Written by
// make generate only.
package processpbconnect
