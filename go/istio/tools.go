//go:build tools

// The upstream programs this module builds (go/README.md: versions and why).
package tools

import (
	_ "istio.io/istio/pilot/cmd/pilot-discovery"
	_ "istio.io/istio/pilot/cmd/pilot-agent"
	_ "istio.io/istio/istioctl/cmd/istioctl"
)
