// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 at the
// version Kubernetes itself uses, for envtest and the local test cluster. It
// is test tooling only and never part of the product.
package main
