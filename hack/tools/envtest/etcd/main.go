// Command etcd is the etcd server, built from the module graph of the pinned
// kubernetes release so its version is the one kube-apiserver is tested with.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
