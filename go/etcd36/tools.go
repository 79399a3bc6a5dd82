//go:build tools

// The upstream programs this module builds (go/README.md: versions and why).
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "go.etcd.io/etcd/etcdctl/v3"
)
