// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 at the
// version Kubernetes itself uses, for envtest and the local test cluster.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
