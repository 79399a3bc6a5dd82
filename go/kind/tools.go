//go:build tools

// The upstream programs this module builds (go/README.md: versions and why).
package tools

import (
	_ "sigs.k8s.io/kind"
)
