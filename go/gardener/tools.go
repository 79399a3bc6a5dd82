//go:build tools

// Gardener's own components, built from its module at the release the lab
// runs (see ../README.md): the garden's gardener-apiserver and the seeds'
// gardener-resource-manager.
package tools

import (
	_ "github.com/gardener/gardener/cmd/gardener-apiserver"
	_ "github.com/gardener/gardener/cmd/gardener-resource-manager"
)
