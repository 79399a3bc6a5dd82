// cpmlab-gardener-render renders, with Gardener's own code, the objects a
// seed holds for one shoot's API exposure, so that the lab applies what a
// gardenlet would rather than objects it wrote itself.
//
// It runs the component gardenlet runs, apiserverexposure.NewSNI(...).Deploy
// (gardener pkg/component/kubernetes/apiserverexposure/sni.go, given the
// values pkg/gardenlet/operation/botanist/kubeapiserverexposure.go gives
// it), against controller-runtime's fake client with Gardener's fake
// secrets manager, and collects every object the component left there:
//
//   - "seed": what gardenlet writes into the seed itself (the Gateway, the
//     VirtualService, the DestinationRules, each by
//     controllerutils.GetAndCreateOrMergePatch);
//   - "managedResources": each ManagedResource with its Secret (what
//     gardener-resource-manager reads; managedresources.CreateForSeed) and
//     the objects that Secret holds, decoded
//     (managedresources.ExtractObjectsFromSecret).
//
// Without --context it prints them as JSON. With --context it reads what
// the component needs from that seed (the shoot namespace's UID, which the
// EnvoyFilters' owner references carry, and kube-apiserver's ClusterIP)
// and applies them there: the seed's objects replaced whole (the
// component's desired state), the ManagedResources' objects either
// directly (--delivery direct: objects the desired state no longer holds
// are deleted) or as the ManagedResource and its Secret for the seed's
// gardener-resource-manager (--delivery managed-resource).
//
// The ManagedResource istio-tls-secrets is never applied: the fake secrets
// manager's data are not certificates, and the lab keeps its own
// credentials under the names the objects reference.
//
//	cpmlab-gardener-render --values values.json                  # print
//	cpmlab-gardener-render --values - --context kind-x --apply   # apply
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"
)

// Gateway is an ingress gateway: its namespace and its pods' labels.
type Gateway struct {
	Namespace string            `json:"namespace"`
	Labels    map[string]string `json:"labels"`
}

// Wildcard is the seed's wildcard endpoint: its hosts, and its own gateway
// when it is not the shoot's.
type Wildcard struct {
	Hosts   []string `json:"hosts"`
	Gateway *Gateway `json:"gateway,omitempty"`
}

// Values are SNIValues as botanist fills them, and what stands in for the
// seed where the renderer does not read it.
type Values struct {
	// The shoot's control-plane namespace in the seed.
	Namespace string `json:"namespace"`
	// Its UID (read from the seed with --context).
	NamespaceUID string `json:"namespaceUID,omitempty"`
	// The API's hosts: internal, then external (botanist's order).
	Hosts []string `json:"hosts"`
	// The apiserver-proxy's EnvoyFilter is rendered (botanist always sets
	// APIServerProxy; sni.go renders it under TLS termination only).
	APIServerProxy bool `json:"apiServerProxy"`
	// kube-apiserver's ClusterIP as the shoot sees it (botanist maps the
	// seed's into 240.0.0.0/8); read from the seed with --context.
	APIServerClusterIP string `json:"apiServerClusterIP,omitempty"`
	// The shoot's ingress gateway.
	Gateway Gateway `json:"gateway"`
	// TLS ends at the gateway (the IstioTLSTermination feature gate and the
	// shoot's opt-in) or passes through.
	TLSTermination bool `json:"tlsTermination"`
	// The seed's wildcard endpoint, if it has a wildcard certificate.
	Wildcard *Wildcard `json:"wildcard,omitempty"`
	// spec.kubernetes.kubeAPIServer.tlsMinVersion, if set.
	TLSMinVersion *string `json:"tlsMinVersion,omitempty"`
	// The API's Gateway is left out and deleted where it is: the lab's
	// `drain-gateway` handover releases the source's gateway this way
	// (sni.go has no such mode; gardenlet would put the Gateway back on
	// the shoot's next reconcile).
	OmitGateway bool `json:"omitGateway,omitempty"`
	// Objects that take the place of the ones of their kind, namespace and
	// name in the ManagedResource kube-apiserver-sni: the lab's own for a
	// mode sni.go has not (the `forward` handover's EnvoyFilters), so that
	// the mode, too, is the ManagedResource's desired state rather than an
	// edit gardener-resource-manager would revert.
	ReplaceInManagedResource []map[string]any `json:"replaceInManagedResource,omitempty"`
	// Labels added to every object applied (the lab's, so that it finds
	// and removes them); none when printing.
	Labels map[string]string `json:"labels,omitempty"`
}

func main() {
	// A FlagSet of its own: imported packages register flags on the global one.
	fs := flag.NewFlagSet("cpmlab-gardener-render", flag.ExitOnError)
	var (
		component  = fs.String("component", "sni", "what to render: sni (the shoot API's exposure) or resource-manager (the seed's gardener-resource-manager)")
		valuesFile = fs.String("values", "-", "the values (JSON), - for standard input")
		kubeCtx    = fs.String("context", "", "the seed's kubeconfig context: read the seed and (with --apply) apply there")
		apply      = fs.Bool("apply", false, "apply the objects to the seed (needs --context)")
		delivery   = fs.String("delivery", "direct", "sni: how the ManagedResources' objects reach the seed, direct or managed-resource")
		version    = fs.Bool("version", false, "print the Gardener release this was built from")
		timeout    = fs.Duration("timeout", 60*time.Second, "how long reading and applying may take")
	)
	_ = fs.Parse(os.Args[1:])
	if *version {
		fmt.Printf("cpmlab-gardener-render: github.com/gardener/gardener %s\n", gardenerVersion())
		return
	}
	if err := run(*component, *valuesFile, *kubeCtx, *apply, *delivery, *timeout); err != nil {
		fmt.Fprintf(os.Stderr, "cpmlab-gardener-render: %v\n", err)
		os.Exit(1)
	}
}

func run(component, valuesFile, kubeCtx string, apply bool, delivery string, timeout time.Duration) error {
	if apply && kubeCtx == "" {
		return fmt.Errorf("--apply needs --context")
	}
	if delivery != "direct" && delivery != "managed-resource" {
		return fmt.Errorf("--delivery: %q is neither direct nor managed-resource", delivery)
	}
	in, err := readValues(valuesFile)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var s *seed
	if kubeCtx != "" {
		if s, err = connect(kubeCtx); err != nil {
			return err
		}
	}
	switch component {
	case "sni":
		v, err := parseValues(in)
		if err != nil {
			return err
		}
		if s != nil {
			if err := s.fill(ctx, v); err != nil {
				return err
			}
		}
		out, err := render(ctx, v)
		if err != nil {
			return err
		}
		if !apply {
			return printJSON(out)
		}
		return s.apply(ctx, v, out, delivery)
	case "resource-manager":
		objects, err := renderResourceManager(ctx, in)
		if err != nil {
			return err
		}
		if !apply {
			return printJSON(objects)
		}
		return s.applyResourceManager(ctx, in, objects)
	default:
		return fmt.Errorf("--component: %q is neither sni nor resource-manager", component)
	}
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func readValues(file string) ([]byte, error) {
	var (
		in  []byte
		err error
	)
	if file == "-" {
		in, err = io.ReadAll(os.Stdin)
	} else {
		in, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("the values: %w", err)
	}
	return in, nil
}

// gardenerVersion is the gardener module's version this binary was built with.
func gardenerVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "github.com/gardener/gardener" {
				return d.Version
			}
		}
	}
	return "unknown"
}
