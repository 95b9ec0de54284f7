// Package pfstream opens one forwarded TCP connection on a port-forward
// connection (pods/portforward, protocol portforward.k8s.io): the error
// stream and the data stream that share a request ID. The router's
// port-forward transport and the Go SDK's port-forward both use it.
package pfstream
