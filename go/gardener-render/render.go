package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	resourcesv1alpha1 "github.com/gardener/gardener/pkg/apis/resources/v1alpha1"
	"github.com/gardener/gardener/pkg/client/kubernetes"
	"github.com/gardener/gardener/pkg/component/kubernetes/apiserverexposure"
	"github.com/gardener/gardener/pkg/utils/managedresources"
	fakesecretsmanager "github.com/gardener/gardener/pkg/utils/secrets/manager/fake"
	istionetworkingv1beta1 "istio.io/client-go/pkg/apis/networking/v1beta1"
)

// ManagedResource is one ManagedResource, its Secrets and what they hold.
type ManagedResource struct {
	Name            string                       `json:"name"`
	ManagedResource *unstructured.Unstructured   `json:"managedResource"`
	Secrets         []*unstructured.Unstructured `json:"secrets"`
	Objects         []*unstructured.Unstructured `json:"objects"`
}

// Output is what the component left in the seed.
type Output struct {
	Seed             []*unstructured.Unstructured `json:"seed"`
	ManagedResources []ManagedResource            `json:"managedResources"`
}

func parseValues(in []byte) (*Values, error) {
	var v Values
	if err := strictJSON(in, &v); err != nil {
		return nil, err
	}
	if v.Namespace == "" || v.Gateway.Namespace == "" || len(v.Hosts) == 0 {
		return nil, fmt.Errorf("the values need namespace, hosts and gateway.namespace")
	}
	return &v, nil
}

// render runs sni.go's Deploy for v against a fake seed and collects what
// it wrote.
func render(ctx context.Context, v *Values) (*Output, error) {
	c := fake.NewClientBuilder().WithScheme(kubernetes.SeedScheme).Build()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: v.Namespace, UID: types.UID(v.NamespaceUID)}}
	if err := c.Create(ctx, ns); err != nil {
		return nil, err
	}
	// What the secrets manager holds for the shoot before the component
	// runs: the cluster and client CAs and kube-apiserver's serving
	// certificate (empty here: the component only copies their data into
	// istio-tls-secrets, which is not applied).
	for _, name := range []string{"ca", "ca-client", "kube-apiserver", "kube-apiserver-current"} {
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: v.Namespace}}); err != nil {
			return nil, err
		}
	}
	sni := apiserverexposure.NewSNI(c, "kube-apiserver", v.Namespace, fakesecretsmanager.New(c, v.Namespace), func() *apiserverexposure.SNIValues {
		return sniValues(v)
	})
	if err := sni.Deploy(ctx); err != nil {
		return nil, fmt.Errorf("apiserverexposure SNI Deploy: %w", err)
	}
	if len(v.ReplaceInManagedResource) > 0 {
		if err := replaceInManagedResource(ctx, c, v); err != nil {
			return nil, err
		}
	}
	return collect(ctx, c, v)
}

// sniValues is botanist's valuesFunc (setAPIServerServiceClusterIPs) for v.
func sniValues(v *Values) *apiserverexposure.SNIValues {
	values := &apiserverexposure.SNIValues{
		Hosts:               v.Hosts,
		IstioIngressGateway: apiserverexposure.IstioIngressGateway{Namespace: v.Gateway.Namespace, Labels: v.Gateway.Labels},
		IstioTLSTermination: v.TLSTermination,
		TLSMinVersion:       v.TLSMinVersion,
	}
	if v.APIServerProxy {
		values.APIServerProxy = &apiserverexposure.APIServerProxy{APIServerClusterIP: v.APIServerClusterIP}
	}
	if v.Wildcard != nil {
		values.WildcardConfiguration = &apiserverexposure.WildcardConfiguration{
			Hosts: v.Wildcard.Hosts,
			// The component copies this Secret's data into istio-tls-secrets
			// only, which is not applied.
			TLSSecret: corev1.Secret{},
		}
		if v.Wildcard.Gateway != nil {
			values.WildcardConfiguration.IstioIngressGateway = &apiserverexposure.IstioIngressGateway{
				Namespace: v.Wildcard.Gateway.Namespace, Labels: v.Wildcard.Gateway.Labels,
			}
		}
	}
	return values
}

// collect lists what the component wrote: the Istio objects of the seed,
// and each ManagedResource with its Secrets and their objects.
func collect(ctx context.Context, c client.Client, v *Values) (*Output, error) {
	out := &Output{Seed: []*unstructured.Unstructured{}, ManagedResources: []ManagedResource{}}
	seedObjects, err := listed(ctx, c, []client.ObjectList{
		&istionetworkingv1beta1.GatewayList{},
		&istionetworkingv1beta1.VirtualServiceList{},
		&istionetworkingv1beta1.DestinationRuleList{},
	}, nil)
	if err != nil {
		return nil, err
	}
	out.Seed = append(out.Seed, seedObjects...)
	mrs := &resourcesv1alpha1.ManagedResourceList{}
	if err := c.List(ctx, mrs, client.InNamespace(v.Namespace)); err != nil {
		return nil, err
	}
	sort.Slice(mrs.Items, func(i, j int) bool { return mrs.Items[i].Name < mrs.Items[j].Name })
	decoder := serializer.NewCodecFactory(kubernetes.SeedScheme).UniversalDeserializer()
	for i := range mrs.Items {
		mr := &mrs.Items[i]
		u, err := toUnstructured(mr)
		if err != nil {
			return nil, err
		}
		entry := ManagedResource{Name: mr.Name, ManagedResource: u, Secrets: []*unstructured.Unstructured{}, Objects: []*unstructured.Unstructured{}}
		for _, ref := range mr.Spec.SecretRefs {
			secret := &corev1.Secret{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: mr.Namespace, Name: ref.Name}, secret); err != nil {
				return nil, fmt.Errorf("ManagedResource %s: its Secret %s: %w", mr.Name, ref.Name, err)
			}
			objects, err := managedresources.ExtractObjectsFromSecret(decoder, secret)
			if err != nil {
				return nil, fmt.Errorf("ManagedResource %s: %w", mr.Name, err)
			}
			u, err := toUnstructured(secret)
			if err != nil {
				return nil, err
			}
			entry.Secrets = append(entry.Secrets, u)
			for _, o := range objects {
				u, err := toUnstructured(o)
				if err != nil {
					return nil, err
				}
				entry.Objects = append(entry.Objects, u)
			}
		}
		sort.Slice(entry.Objects, func(i, j int) bool { return key(entry.Objects[i]) < key(entry.Objects[j]) })
		out.ManagedResources = append(out.ManagedResources, entry)
	}
	return out, nil
}

// toUnstructured gives an object its kind and apiVersion and drops what
// only the fake client set, so that it can be applied as it is.
func toUnstructured(o client.Object) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(o, kubernetes.SeedScheme)
	if err != nil {
		return nil, err
	}
	o.GetObjectKind().SetGroupVersionKind(gvk)
	raw, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	u.SetResourceVersion("")
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

func key(u *unstructured.Unstructured) string {
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

// replaceInManagedResource writes the ManagedResource kube-apiserver-sni
// again (managedresources.CreateForSeed, as sni.go does) with the objects
// of v.ReplaceInManagedResource in the place of those of their kind,
// namespace and name, and any other of them added.
func replaceInManagedResource(ctx context.Context, c client.Client, v *Values) error {
	replace := map[string][]byte{}
	var order []string
	for _, o := range v.ReplaceInManagedResource {
		u := &unstructured.Unstructured{Object: o}
		raw, err := json.Marshal(o)
		if err != nil {
			return err
		}
		if _, dup := replace[key(u)]; !dup {
			order = append(order, key(u))
		}
		replace[key(u)] = raw
	}
	mr := &resourcesv1alpha1.ManagedResource{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: v.Namespace, Name: managedResourceSNI}, mr); err != nil {
		return fmt.Errorf("ManagedResource %s (sni.go makes it under TLS termination only): %w", managedResourceSNI, err)
	}
	decoder := serializer.NewCodecFactory(kubernetes.SeedScheme).UniversalDeserializer()
	registry := managedresources.NewRegistry(kubernetes.SeedScheme, kubernetes.SeedCodec, kubernetes.SeedSerializer)
	for _, ref := range mr.Spec.SecretRefs {
		secret := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: mr.Namespace, Name: ref.Name}, secret); err != nil {
			return err
		}
		objects, err := managedresources.ExtractObjectsFromSecret(decoder, secret)
		if err != nil {
			return err
		}
		for _, o := range objects {
			u, err := toUnstructured(o)
			if err != nil {
				return err
			}
			if _, ok := replace[key(u)]; ok {
				continue
			}
			raw, err := json.Marshal(u.Object)
			if err != nil {
				return err
			}
			registry.AddSerialized(fileName(u), raw)
		}
	}
	for _, k := range order {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(replace[k]); err != nil {
			return err
		}
		registry.AddSerialized(fileName(u), replace[k])
	}
	data, err := registry.SerializedObjects()
	if err != nil {
		return err
	}
	return managedresources.CreateForSeed(ctx, c, v.Namespace, managedResourceSNI, false, data)
}

// fileName is sni.go's file name of an object in a ManagedResource.
func fileName(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s__%s__%s.yaml", strings.ToLower(u.GetKind()), u.GetNamespace(), u.GetName())
}

// listed is every object of lists in the fake seed, each changed by edit
// (if any) before it is made unstructured.
func listed(ctx context.Context, c client.Client, lists []client.ObjectList, edit func(client.Object)) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, l := range lists {
		if err := c.List(ctx, l); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return nil, err
		}
		for _, i := range items {
			o := i.(client.Object)
			if edit != nil {
				edit(o)
			}
			u, err := toUnstructured(o)
			if err != nil {
				return nil, err
			}
			out = append(out, u)
		}
	}
	return out, nil
}
