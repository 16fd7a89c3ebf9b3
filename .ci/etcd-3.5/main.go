// etcd 3.5's server, built from the Go module proxy: the same main as etcd's own.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
