//go:build tools

// The upstream programs this module builds (go/README.md: versions and why).
package tools

import (
	_ "github.com/coredns/coredns"
)
