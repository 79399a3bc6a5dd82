package main

import (
	"context"
	"fmt"
	"net"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gardener/gardener/pkg/client/kubernetes"
)

// The ManagedResources sni.go creates (its managedResourceName and
// managedResourceNameIstioTLSSecrets).
const (
	managedResourceSNI        = "kube-apiserver-sni"
	managedResourceTLSSecrets = "istio-tls-secrets"
)

// labelManagedResource marks an object applied directly in a
// ManagedResource's stead with that ManagedResource's name, so that one
// its desired state no longer holds is found and deleted.
const labelManagedResource = "cpmlab.managed-resource"

// reservedKubeAPIServerRange is where botanist maps kube-apiserver's
// ClusterIP for the shoot (v1beta1constants.ReservedKubeApiServerMappingRange,
// mapToReservedKubeApiServerRange in botanist/kubeapiserverexposure.go).
const reservedKubeAPIServerPrefix = 240

// seed is a client of the seed the objects go to.
type seed struct {
	c client.Client
}

func connect(kubeCtx string) (*seed, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		clientcmd.NewDefaultClientConfigLoadingRules(),
		&clientcmd.ConfigOverrides{CurrentContext: kubeCtx},
	).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig context %s: %w", kubeCtx, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: kubernetes.SeedScheme})
	if err != nil {
		return nil, fmt.Errorf("a client of %s: %w", kubeCtx, err)
	}
	return &seed{c: c}, nil
}

// fill reads from the seed what the component needs: the namespace's UID
// and, for the apiserver-proxy, kube-apiserver's ClusterIP mapped as
// botanist maps it.
func (s *seed) fill(ctx context.Context, v *Values) error {
	ns := &corev1.Namespace{}
	if err := s.c.Get(ctx, client.ObjectKey{Name: v.Namespace}, ns); err != nil {
		return fmt.Errorf("the shoot's namespace %s: %w", v.Namespace, err)
	}
	v.NamespaceUID = string(ns.UID)
	if v.APIServerProxy && v.APIServerClusterIP == "" {
		svc := &corev1.Service{}
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: v.Namespace, Name: "kube-apiserver"}, svc); err != nil {
			return fmt.Errorf("kube-apiserver's Service: %w", err)
		}
		ip := net.ParseIP(svc.Spec.ClusterIP).To4()
		if ip == nil {
			return fmt.Errorf("kube-apiserver's Service has no IPv4 ClusterIP (%q)", svc.Spec.ClusterIP)
		}
		v.APIServerClusterIP = net.IPv4(reservedKubeAPIServerPrefix, ip[1], ip[2], ip[3]).String()
	}
	return nil
}

// apply puts the rendered objects into the seed, each replaced whole.
func (s *seed) apply(ctx context.Context, v *Values, out *Output, delivery string) error {
	for _, o := range out.Seed {
		if v.OmitGateway && o.GetKind() == "Gateway" {
			switch err := s.c.Delete(ctx, o); {
			case apierrors.IsNotFound(err):
			case err != nil:
				return fmt.Errorf("delete %s: %w", key(o), err)
			default:
				fmt.Printf("%s deleted (omitGateway)\n", key(o))
			}
			continue
		}
		if err := s.put(ctx, o, v.Labels); err != nil {
			return err
		}
	}
	sni := false
	for _, mr := range out.ManagedResources {
		if mr.Name == managedResourceTLSSecrets {
			continue
		}
		sni = sni || mr.Name == managedResourceSNI
		if delivery == "managed-resource" {
			for _, secret := range mr.Secrets {
				if err := s.create(ctx, secret, v.Labels); err != nil {
					return err
				}
			}
			if err := s.put(ctx, mr.ManagedResource, v.Labels); err != nil {
				return err
			}
			continue
		}
		labels := map[string]string{labelManagedResource: mr.Name}
		for k, val := range v.Labels {
			labels[k] = val
		}
		for _, o := range mr.Objects {
			if err := s.put(ctx, o, labels); err != nil {
				return err
			}
		}
		if err := s.prune(ctx, v, mr.Name, mr.Objects); err != nil {
			return err
		}
	}
	if !sni {
		// Passthrough: sni.go deletes the ManagedResource (DeleteForSeed),
		// and gardener-resource-manager its objects; directly, the lab.
		if delivery == "managed-resource" {
			mr := &unstructured.Unstructured{}
			mr.SetGroupVersionKind(schema.GroupVersionKind{Group: "resources.gardener.cloud", Version: "v1alpha1", Kind: "ManagedResource"})
			mr.SetNamespace(v.Namespace)
			mr.SetName(managedResourceSNI)
			switch err := s.c.Delete(ctx, mr); {
			case apierrors.IsNotFound(err):
			case err != nil:
				return fmt.Errorf("delete ManagedResource %s: %w", managedResourceSNI, err)
			default:
				fmt.Printf("ManagedResource %s/%s deleted\n", v.Namespace, managedResourceSNI)
			}
		} else if err := s.prune(ctx, v, managedResourceSNI, nil); err != nil {
			return err
		}
	}
	return nil
}

// put creates o, or replaces the object of its name with it.
func (s *seed) put(ctx context.Context, o *unstructured.Unstructured, labels map[string]string) error {
	o = o.DeepCopy()
	addLabels(o, labels)
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(o.GroupVersionKind())
	err := s.c.Get(ctx, client.ObjectKeyFromObject(o), existing)
	switch {
	case apierrors.IsNotFound(err):
		if err := s.c.Create(ctx, o); err != nil {
			return fmt.Errorf("create %s: %w", key(o), err)
		}
		fmt.Printf("%s created\n", key(o))
	case err != nil:
		return fmt.Errorf("read %s: %w", key(o), err)
	default:
		o.SetResourceVersion(existing.GetResourceVersion())
		if err := s.c.Update(ctx, o); err != nil {
			return fmt.Errorf("replace %s: %w", key(o), err)
		}
		fmt.Printf("%s replaced\n", key(o))
	}
	return nil
}

// create creates o unless it exists (a ManagedResource's Secret is
// immutable, named after its content).
func (s *seed) create(ctx context.Context, o *unstructured.Unstructured, labels map[string]string) error {
	o = o.DeepCopy()
	addLabels(o, labels)
	err := s.c.Create(ctx, o)
	switch {
	case apierrors.IsAlreadyExists(err):
		fmt.Printf("%s present\n", key(o))
	case err != nil:
		return fmt.Errorf("create %s: %w", key(o), err)
	default:
		fmt.Printf("%s created\n", key(o))
	}
	return nil
}

// prune deletes what was applied for ManagedResource mr and is not in
// keep: the EnvoyFilters it holds, in the gateways' namespaces.
func (s *seed) prune(ctx context.Context, v *Values, mr string, keep []*unstructured.Unstructured) error {
	want := map[string]bool{}
	for _, o := range keep {
		want[key(o)] = true
	}
	selector := client.MatchingLabels{labelManagedResource: mr}
	for k, val := range v.Labels {
		selector[k] = val
	}
	namespaces := []string{v.Gateway.Namespace}
	if v.Wildcard != nil && v.Wildcard.Gateway != nil {
		namespaces = append(namespaces, v.Wildcard.Gateway.Namespace)
	}
	var gone []string
	for _, ns := range namespaces {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: "networking.istio.io", Version: "v1alpha3", Kind: "EnvoyFilterList"})
		if err := s.c.List(ctx, list, client.InNamespace(ns), selector); err != nil {
			return fmt.Errorf("list the EnvoyFilters of %s in %s: %w", mr, ns, err)
		}
		for i := range list.Items {
			o := &list.Items[i]
			o.SetKind("EnvoyFilter")
			if want[key(o)] {
				continue
			}
			if err := client.IgnoreNotFound(s.c.Delete(ctx, o)); err != nil {
				return fmt.Errorf("delete %s: %w", key(o), err)
			}
			gone = append(gone, key(o))
		}
	}
	sort.Strings(gone)
	for _, g := range gone {
		fmt.Printf("%s deleted (no longer in %s)\n", g, mr)
	}
	return nil
}

func addLabels(o *unstructured.Unstructured, labels map[string]string) {
	if len(labels) == 0 {
		return
	}
	l := o.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	for k, v := range labels {
		l[k] = v
	}
	o.SetLabels(l)
}

// applyResourceManager puts the seed's gardener-resource-manager into the
// seed: its Secrets (the secrets manager's are immutable) and the
// namespace created where absent, everything else replaced whole.
func (s *seed) applyResourceManager(ctx context.Context, in []byte, objects []*unstructured.Unstructured) error {
	var v ResourceManagerValues
	if err := strictJSON(in, &v); err != nil {
		return err
	}
	for _, o := range objects {
		var err error
		switch o.GetKind() {
		case "Namespace":
			// garden is shared: gardenlet's chart and etcd-druid's objects
			// (applied server-side) label it as their own.
			err = s.create(ctx, o, nil)
		case "Secret":
			err = s.create(ctx, o, v.Labels)
		default:
			err = s.put(ctx, o, v.Labels)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
