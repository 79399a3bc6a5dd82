//go:build tools

// The upstream programs this module builds (go/README.md: versions and why).
package tools

import (
	_ "go.universe.tf/metallb/controller"
	_ "go.universe.tf/metallb/speaker"
)
