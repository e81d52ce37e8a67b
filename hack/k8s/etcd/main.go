// Command etcd is the etcd server CLI, built from go.etcd.io/etcd/server/v3 at
// the version kube-apiserver is tested with (see go.mod).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
