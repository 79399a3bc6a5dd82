//go:build tools

// etcd-backup-restore (etcdbrctl), built from its module at the release
// etcd-druid v0.38.1 runs behind its UpgradeEtcdVersion gate (see
// ../README.md).
package tools

import _ "github.com/gardener/etcd-backup-restore"
