// Command etcd: the etcd server of the version that k8s.io/kubernetes's module graph selects.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
