package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	"github.com/gardener/gardener/pkg/client/kubernetes"
	"github.com/gardener/gardener/pkg/component/gardener/resourcemanager"
	sharedcomponent "github.com/gardener/gardener/pkg/component/shared"
	"github.com/gardener/gardener/pkg/utils/secrets"
	fakesecretsmanager "github.com/gardener/gardener/pkg/utils/secrets/manager/fake"
)

// ResourceManagerValues are what the lab chooses of the seed's
// gardener-resource-manager; the rest are gardenlet's values for it
// (pkg/gardenlet/controller/seed/seed/components.go,
// newGardenerResourceManager, with sharedcomponent's runtime defaults).
type ResourceManagerValues struct {
	// The image the lab built of gardener-resource-manager.
	Image string `json:"image"`
	// Replicas; gardenlet's default (2) where not set.
	Replicas *int32 `json:"replicas,omitempty"`
	// Labels added to every object applied.
	Labels map[string]string `json:"labels,omitempty"`
}

// The kinds the seed's gardener-resource-manager is deployed as, and
// those the lab leaves out: its webhook configurations (the fake secrets
// manager's CA is no CA kube-apiserver could check it by; left out, the
// webhooks are not called), and the VerticalPodAutoscaler and
// ServiceMonitor, whose CRDs a kind seed has not.
var resourceManagerLists = []client.ObjectList{
	&apiextensionsv1.CustomResourceDefinitionList{},
	&corev1.ServiceAccountList{},
	&corev1.ConfigMapList{},
	&corev1.SecretList{},
	&corev1.ServiceList{},
	&rbacv1.ClusterRoleList{},
	&rbacv1.ClusterRoleBindingList{},
	&rbacv1.RoleList{},
	&rbacv1.RoleBindingList{},
	&appsv1.DeploymentList{},
	&policyv1.PodDisruptionBudgetList{},
}

// renderResourceManager runs gardenlet's seed gardener-resource-manager
// component's Deploy against a fake seed and collects what it wrote, with
// the chart's PriorityClass it runs under
// (charts/gardener/gardenlet/templates/priorityclass.yaml) and the lab's
// image.
func renderResourceManager(ctx context.Context, in []byte) ([]*unstructured.Unstructured, error) {
	var v ResourceManagerValues
	if err := strictJSON(in, &v); err != nil {
		return nil, err
	}
	if v.Image == "" {
		return nil, fmt.Errorf("the values need image")
	}
	c := fake.NewClientBuilder().WithScheme(kubernetes.SeedScheme).Build()
	ns := v1beta1constants.GardenNamespace
	sm := fakesecretsmanager.New(c, ns)
	// The seed's CA the server certificate is signed by (gardenlet's
	// SecretNameServerCA, ca-seed), generated as the secrets manager does.
	if _, err := sm.Generate(ctx, &secrets.CertificateSecretConfig{
		Name: v1beta1constants.SecretNameCASeed, CommonName: v1beta1constants.SecretNameCASeed, CertType: secrets.CACert,
	}); err != nil {
		return nil, fmt.Errorf("the seed's CA: %w", err)
	}
	// gardenlet's values for the seed's gardener-resource-manager.
	values := resourcemanager.Values{
		HighAvailabilityConfigWebhookEnabled: true,
		DefaultNotReadyToleration:            new(int64(60)),
		DefaultUnreachableToleration:         new(int64(60)),
		LogLevel:                             "info",
		LogFormat:                            "json",
		PriorityClassName:                    v1beta1constants.PriorityClassNameSeedSystemCritical,
		SecretNameServerCA:                   v1beta1constants.SecretNameCASeed,
		VPAInPlaceUpdatesEnabled:             true,
		Replicas:                             v.Replicas,
	}
	grm, err := sharedcomponent.NewRuntimeGardenerResourceManager(c, ns, sm, values)
	if err != nil {
		return nil, err
	}
	if err := grm.Deploy(ctx); err != nil {
		return nil, fmt.Errorf("gardener-resource-manager Deploy: %w", err)
	}
	var out []*unstructured.Unstructured
	// The seed's namespace garden, which gardenlet's chart makes.
	gardenNS, err := toUnstructured(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil {
		return nil, err
	}
	out = append(out, gardenNS)
	pc := &schedulingv1.PriorityClass{
		ObjectMeta:  metav1.ObjectMeta{Name: v1beta1constants.PriorityClassNameSeedSystemCritical},
		Value:       999998950,
		Description: "This class is used to ensure that the gardener-resource-manager has a high priority and is not preempted in favor of other pods.",
	}
	u, err := toUnstructured(pc)
	if err != nil {
		return nil, err
	}
	out = append(out, u)
	objects, err := listed(ctx, c, resourceManagerLists, func(o client.Object) {
		if d, ok := o.(*appsv1.Deployment); ok {
			for i := range d.Spec.Template.Spec.Containers {
				d.Spec.Template.Spec.Containers[i].Image = v.Image
				d.Spec.Template.Spec.Containers[i].ImagePullPolicy = corev1.PullIfNotPresent
			}
		}
	})
	if err != nil {
		return nil, err
	}
	out = append(out, objects...)
	sort.SliceStable(out, func(i, j int) bool { return order(out[i]) < order(out[j]) })
	return out, nil
}

// order puts what others need first: the PriorityClass, the CRD, the
// ServiceAccount, RBAC, ConfigMaps and Secrets, then the Service, the
// Deployment and its PodDisruptionBudget.
func order(u *unstructured.Unstructured) int {
	switch u.GetKind() {
	case "Namespace", "PriorityClass", "CustomResourceDefinition":
		return 0
	case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		return 1
	case "ConfigMap", "Secret":
		return 2
	default:
		return 3
	}
}

func strictJSON(in []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the values: %w", err)
	}
	return nil
}
