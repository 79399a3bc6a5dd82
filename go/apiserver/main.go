// cpmlab-apiserver: the lab's API tier built from Kubernetes' own server
// code (k8s.io/apiserver, as packaged by Debian): request handling, etcd3
// storage with the watch cache, the etcd client, readyz with the etcd
// check, and graceful shutdown with its delay and GOAWAY, as kube-apiserver
// runs them. It serves only what the lab's probes and controllers use
// (Namespaces, ConfigMaps, Leases), authenticates with a static token file,
// client certificates, and an authenticating proxy's request headers (a
// gateway that ends TLS, as Istio does for Gardener), and allows every
// authenticated request.
//
// Flags are kube-apiserver's where they exist (--etcd-servers, --etcd-*file,
// --secure-port, --tls-*, --token-auth-file, --client-ca-file,
// --requestheader-*, --shutdown-delay-duration, --goaway-chance,
// --storage-media-type, ...).
package main

import (
	"context"
	goflag "flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiserverconfig "k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"

	"cpmlab/apiserver/openapi"
)

// Every answer names the kind of API server that gave it.
const serverHeader = "X-Cpmlab-Api-Server"

type options struct {
	run           *genericoptions.ServerRunOptions
	serving       *genericoptions.SecureServingOptionsWithLoopback
	etcd          *genericoptions.EtcdOptions
	requestHeader *genericoptions.RequestHeaderAuthenticationOptions
	tokenFile     string
	clientCAFile  string
	seed, replica string
}

func newOptions() *options {
	o := &options{
		run:     genericoptions.NewServerRunOptions(),
		serving: genericoptions.NewSecureServingOptions().WithLoopback(),
		// The codec is replaced once the storage media type is known.
		etcd:          genericoptions.NewEtcdOptions(storagebackend.NewDefaultConfig("/registry", nil)),
		requestHeader: &genericoptions.RequestHeaderAuthenticationOptions{},
	}
	o.serving.BindPort = 443
	o.etcd.DefaultStorageMediaType = runtime.ContentTypeProtobuf
	return o
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	o.run.AddUniversalFlags(fs)
	o.serving.AddFlags(fs)
	o.etcd.AddFlags(fs)
	o.requestHeader.AddFlags(fs)
	fs.StringVar(&o.tokenFile, "token-auth-file", "", "Static bearer tokens (kube-apiserver's CSV: token,user,uid,\"group1,group2\").")
	fs.StringVar(&o.clientCAFile, "client-ca-file", "", "Authenticate client certificates signed by this CA (the user is the certificate's CN).")
	fs.StringVar(&o.seed, "cpmlab-seed", "", "The seed this replica runs in, answered as X-Cpmlab-Seed.")
	fs.StringVar(&o.replica, "cpmlab-name", "", "This replica's name, answered as X-Cpmlab-Server.")
}

func (o *options) validate() error {
	var errs []string
	for _, e := range append(append(append(o.run.Validate(), o.serving.Validate()...), o.etcd.Validate()...), o.requestHeader.Validate()...) {
		errs = append(errs, e.Error())
	}
	if o.tokenFile == "" && o.clientCAFile == "" {
		errs = append(errs, "--token-auth-file or --client-ca-file is required: no request could be authenticated")
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// storageCodec encodes objects for etcd in the media type kube-apiserver
// uses (protobuf by default), as their versioned form, and decodes either.
func storageCodec(mediaType string) (runtime.Codec, error) {
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		return nil, fmt.Errorf("--storage-media-type %q: no serializer", mediaType)
	}
	versions := schema.GroupVersions{corev1.SchemeGroupVersion, coordinationv1.SchemeGroupVersion}
	return codecs.CodecForVersions(info.Serializer, codecs.UniversalDeserializer(), versions, runtime.InternalGroupVersioner), nil
}

func (o *options) config() (*genericapiserver.Config, error) {
	if err := o.run.DefaultAdvertiseAddress(o.serving.SecureServingOptions); err != nil {
		return nil, err
	}
	c := genericapiserver.NewConfig(codecs)
	if err := o.run.ApplyTo(c); err != nil {
		return nil, err
	}
	if err := o.serving.ApplyTo(&c.SecureServing, &c.LoopbackClientConfig); err != nil {
		return nil, err
	}
	codec, err := storageCodec(o.etcd.DefaultStorageMediaType)
	if err != nil {
		return nil, err
	}
	o.etcd.StorageConfig.Codec = codec
	if err := o.etcd.ApplyTo(c); err != nil {
		return nil, err
	}

	var authns []authenticator.Request
	// An authenticating proxy first, as kube-apiserver orders them: a
	// request whose client certificate the front-proxy CA signed is the
	// user its headers name.
	var clientCAs []dynamiccertificates.CAContentProvider
	rh, err := o.requestHeader.ToAuthenticationRequestHeaderConfig()
	if err != nil {
		return nil, fmt.Errorf("--requestheader-client-ca-file: %w", err)
	}
	if rh != nil {
		authns = append(authns, headerrequest.NewDynamicVerifyOptionsSecure(
			rh.CAContentProvider.VerifyOptions,
			rh.AllowedClientNames,
			rh.UsernameHeaders,
			rh.UIDHeaders,
			rh.GroupHeaders,
			rh.ExtraHeaderPrefixes,
		))
		clientCAs = append(clientCAs, rh.CAContentProvider)
	}
	if o.tokenFile != "" {
		tokens, err := tokenfile.NewCSV(o.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-auth-file: %w", err)
		}
		authns = append(authns, bearertoken.New(tokens))
	}
	if o.clientCAFile != "" {
		ca, err := dynamiccertificates.NewDynamicCAContentFromFile("client-ca", o.clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--client-ca-file: %w", err)
		}
		clientCAs = append(clientCAs, ca)
		authns = append(authns, x509request.NewDynamic(ca.VerifyOptions, x509request.CommonNameUserConversion))
	}
	// The TLS handshake asks for certificates of either CA.
	if len(clientCAs) > 0 {
		c.SecureServing.ClientCA = dynamiccertificates.NewUnionCAContentProvider(clientCAs...)
	}
	// Health and version are open to anyone, as kube-apiserver's RBAC
	// (system:public-info-viewer) leaves them: load balancers check /readyz
	// without credentials. Anonymous requests are authenticated on those
	// paths only, so allowing every authenticated request stays safe.
	var open []apiserverconfig.AnonymousAuthCondition
	for _, p := range []string{"/healthz", "/livez", "/readyz", "/version"} {
		open = append(open, apiserverconfig.AnonymousAuthCondition{Path: p})
	}
	authns = append(authns, anonymous.NewAuthenticator(open))
	c.Authentication.Authenticator = union.New(authns...)
	c.Authorization.Authorizer = authorizerfactory.NewAlwaysAllowAuthorizer()

	namer := openapinamer.NewDefinitionNamer(scheme)
	c.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(openapi.GetOpenAPIDefinitions, namer)
	c.OpenAPIConfig.Info.Title = "cpmlab-apiserver"
	c.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, namer)
	c.OpenAPIV3Config.Info.Title = "cpmlab-apiserver"

	// Every answer says which replica in which seed gave it, as the
	// stand-in's do, so the probes attribute requests without guessing.
	seed, replica := o.seed, o.replica
	c.BuildHandlerChainFunc = func(h http.Handler, c *genericapiserver.Config) http.Handler {
		inner := genericapiserver.DefaultBuildHandlerChain(h, c)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if seed != "" {
				w.Header().Set("X-Cpmlab-Seed", seed)
			}
			if replica != "" {
				w.Header().Set("X-Cpmlab-Server", replica)
			}
			w.Header().Set(serverHeader, "generic")
			inner.ServeHTTP(w, r)
		})
	}
	return c, nil
}

// systemNamespaces are created at start, as kube-apiserver's system
// namespaces controller does.
var systemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// ensureNamespaces creates the system namespaces that do not exist yet,
// retrying while etcd cannot be reached, until the server stops.
func ensureNamespaces(ctx context.Context, namespaces rest.Creater) {
	for _, name := range systemNamespaces {
		for {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
			_, err := namespaces.Create(genericapirequest.WithNamespace(ctx, ""), ns, nil, &metav1.CreateOptions{})
			if err == nil || apierrors.IsAlreadyExists(err) {
				break
			}
			klog.Warningf("creating namespace %s: %v (retrying)", name, err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

func install(s *genericapiserver.GenericAPIServer, opts generic.RESTOptionsGetter) error {
	core := genericapiserver.NewDefaultAPIGroupInfo("", scheme, metav1.ParameterCodec, codecs)
	core.VersionedResourcesStorageMap["v1"] = map[string]rest.Storage{}
	for _, r := range coreResources {
		st, err := r.storage(opts)
		if err != nil {
			return fmt.Errorf("%s: %w", r.gr, err)
		}
		core.VersionedResourcesStorageMap["v1"][r.gr.Resource] = st
	}
	namespaces := core.VersionedResourcesStorageMap["v1"]["namespaces"].(rest.Creater)
	s.AddPostStartHookOrDie("cpmlab-system-namespaces", func(hc genericapiserver.PostStartHookContext) error {
		go ensureNamespaces(hc, namespaces)
		return nil
	})
	if err := s.InstallLegacyAPIGroup(genericapiserver.DefaultLegacyAPIPrefix, &core); err != nil {
		return err
	}
	coord := genericapiserver.NewDefaultAPIGroupInfo(coordinationv1.GroupName, scheme, metav1.ParameterCodec, codecs)
	coord.VersionedResourcesStorageMap["v1"] = map[string]rest.Storage{}
	for _, r := range coordinationResources {
		st, err := r.storage(opts)
		if err != nil {
			return fmt.Errorf("%s: %w", r.gr, err)
		}
		coord.VersionedResourcesStorageMap["v1"][r.gr.Resource] = st
	}
	return s.InstallAPIGroup(&coord)
}

func run() error {
	o := newOptions()
	fs := pflag.NewFlagSet("cpmlab-apiserver", pflag.ContinueOnError)
	o.addFlags(fs)
	showVersion := fs.Bool("version", false, "Print the version and exit.")
	logFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(logFlags)
	fs.AddGoFlagSet(logFlags)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return usageError{err}
	}
	if *showVersion {
		fmt.Println(version.Get().GitVersion)
		return nil
	}
	if err := o.validate(); err != nil {
		return usageError{err}
	}
	c, err := o.config()
	if err != nil {
		return err
	}
	server, err := c.Complete(nil).New("cpmlab-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return err
	}
	if err := install(server, c.RESTOptionsGetter); err != nil {
		return err
	}
	return server.PrepareRun().RunWithContext(genericapiserver.SetupSignalContext())
}

type usageError struct{ error }

func main() {
	if err := run(); err != nil {
		klog.Flush()
		fmt.Fprintf(os.Stderr, "cpmlab-apiserver: %v\n", err)
		if _, ok := err.(usageError); ok {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
