package main

// The resources this API server serves: Namespaces and ConfigMaps (core/v1)
// and Leases (coordination.k8s.io/v1), stored by k8s.io/apiserver's generic
// registry store (etcd3 storage, watch cache), as kube-apiserver stores them.
//
// k8s.io/api holds only the versioned types; kube-apiserver's internal types
// live in k8s.io/kubernetes, which is not packaged. The versioned Go types
// are registered as the internal version too, so the scheme needs no
// conversion: an object of one Go type is the same in both versions.

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"
)

var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
)

func init() {
	must(corev1.AddToScheme(scheme))
	must(coordinationv1.AddToScheme(scheme))
	scheme.AddKnownTypes(schema.GroupVersion{Group: "", Version: runtime.APIVersionInternal},
		&corev1.Namespace{}, &corev1.NamespaceList{}, &corev1.ConfigMap{}, &corev1.ConfigMapList{})
	scheme.AddKnownTypes(schema.GroupVersion{Group: coordinationv1.GroupName, Version: runtime.APIVersionInternal},
		&coordinationv1.Lease{}, &coordinationv1.LeaseList{})
	// Types every API server answers with, whatever the group.
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	scheme.AddUnversionedTypes(unversioned, &metav1.Status{}, &metav1.APIVersions{},
		&metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// strategy is the create/update/delete policy of one resource: ObjectMeta
// validation, generation and status kept as the API server keeps them.
type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	namespaced bool
	// prepare sets what the server owns on create (a Namespace's phase).
	prepare func(obj runtime.Object)
}

func (s strategy) NamespaceScoped() bool { return s.namespaced }

func (s strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	if s.prepare != nil {
		s.prepare(obj)
	}
}

func (s strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	if s.prepare != nil {
		s.prepare(obj)
	}
}

func (s strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	m, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	nameFn := apivalidation.NameIsDNSSubdomain
	if !s.namespaced {
		nameFn = apivalidation.NameIsDNSLabel
	}
	return apivalidation.ValidateObjectMetaAccessor(m, s.namespaced, nameFn, field.NewPath("metadata"))
}

func (s strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	errs := s.Validate(ctx, obj)
	m, err1 := meta.Accessor(obj)
	o, err2 := meta.Accessor(old)
	if err1 == nil && err2 == nil {
		errs = append(errs, apivalidation.ValidateObjectMetaAccessorUpdate(m, o, field.NewPath("metadata"))...)
	}
	return errs
}

func (strategy) WarningsOnCreate(context.Context, runtime.Object) []string { return nil }
func (strategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}
func (strategy) Canonicalize(runtime.Object)    {}
func (strategy) AllowCreateOnUpdate() bool      { return false }
func (strategy) AllowUnconditionalUpdate() bool { return true }

// getAttrs gives the labels and the metadata fields that list and watch
// selectors match (metadata.name, metadata.namespace).
func getAttrs(namespaced bool) storage.AttrFunc {
	return func(obj runtime.Object) (labels.Set, fields.Set, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, nil, err
		}
		f := fields.Set{"metadata.name": m.GetName()}
		if namespaced {
			f["metadata.namespace"] = m.GetNamespace()
		}
		return labels.Set(m.GetLabels()), f, nil
	}
}

type resource struct {
	gr         schema.GroupResource
	singular   string
	short      []string
	namespaced bool
	newObj     func() runtime.Object
	newList    func() runtime.Object
	prepare    func(obj runtime.Object)
}

// withShortNames adds what kubectl resolves `cm` and `ns` with.
type withShortNames struct {
	*genericregistry.Store
	short []string
}

func (w withShortNames) ShortNames() []string { return w.short }

var _ rest.ShortNamesProvider = withShortNames{}

func (r resource) storage(opts generic.RESTOptionsGetter) (rest.Storage, error) {
	s, err := r.store(opts)
	if err != nil {
		return nil, err
	}
	if len(r.short) == 0 {
		return s, nil
	}
	return withShortNames{s, r.short}, nil
}

func (r resource) store(opts generic.RESTOptionsGetter) (*genericregistry.Store, error) {
	s := strategy{ObjectTyper: scheme, NameGenerator: names.SimpleNameGenerator, namespaced: r.namespaced, prepare: r.prepare}
	attrs := getAttrs(r.namespaced)
	store := &genericregistry.Store{
		NewFunc:                   r.newObj,
		NewListFunc:               r.newList,
		PredicateFunc:             func(l labels.Selector, f fields.Selector) storage.SelectionPredicate { return storage.SelectionPredicate{Label: l, Field: f, GetAttrs: attrs} },
		DefaultQualifiedResource:  r.gr,
		SingularQualifiedResource: schema.GroupResource{Group: r.gr.Group, Resource: r.singular},
		CreateStrategy:            s,
		UpdateStrategy:            s,
		DeleteStrategy:            s,
		TableConvertor:            rest.NewDefaultTableConvertor(r.gr),
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: opts, AttrFunc: attrs}); err != nil {
		return nil, err
	}
	return store, nil
}

var coreResources = []resource{
	{
		gr: corev1.Resource("namespaces"), singular: "namespace", short: []string{"ns"}, namespaced: false,
		newObj: func() runtime.Object { return &corev1.Namespace{} }, newList: func() runtime.Object { return &corev1.NamespaceList{} },
		// No namespace controller runs: a namespace is Active while it exists.
		prepare: func(obj runtime.Object) { obj.(*corev1.Namespace).Status.Phase = corev1.NamespaceActive },
	},
	{
		gr: corev1.Resource("configmaps"), singular: "configmap", short: []string{"cm"}, namespaced: true,
		newObj: func() runtime.Object { return &corev1.ConfigMap{} }, newList: func() runtime.Object { return &corev1.ConfigMapList{} },
	},
}

var coordinationResources = []resource{
	{
		gr: coordinationv1.Resource("leases"), singular: "lease", namespaced: true,
		newObj: func() runtime.Object { return &coordinationv1.Lease{} }, newList: func() runtime.Object { return &coordinationv1.LeaseList{} },
	},
}
