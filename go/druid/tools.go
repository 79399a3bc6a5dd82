//go:build tools

// etcd-druid's controller, built from its module at the release the lab
// runs (see ../README.md).
package tools

import _ "github.com/gardener/etcd-druid/cmd"
