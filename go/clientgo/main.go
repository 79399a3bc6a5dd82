// cpmlab-clientgo: the lab's controller stand-in on Kubernetes' own client
// library (k8s.io/client-go, the code gardenlet, kube-controller-manager and
// gardener-resource-manager run). Two roles, each writing one JSON object
// per line:
//
//	cpmlab-clientgo informer  a shared informer on the probe namespace's
//	                          ConfigMaps: every list and watch request its
//	                          reflector makes, every (re)list, every event of
//	                          the counter ConfigMap, with receipt times
//	cpmlab-clientgo elect     a leader-election candidate on a Lease (client-go's
//	                          leaderelection with a Lease lock): every get,
//	                          create and update of the lock with its latency
//	                          and the lease as read, and every acquire, loss
//	                          and new leader seen
//
// Both reach the API with a kubeconfig; the lab gives each candidate one
// that names its own seed's API replicas (the in-cluster path a seed
// component uses), and the informer one through the public name.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// out writes records, one JSON object per line, from any goroutine.
type out struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
	seq   uint64
}

// rec is one record: what happened and when, by the process's own clocks.
type rec map[string]any

func (o *out) write(r rec) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	o.seq++
	r["seq"] = o.seq
	if _, ok := r["t_unix_ms"]; !ok {
		r["t_unix_ms"] = float64(now.UnixNano()) / 1e6
	}
	if _, ok := r["t_mono_ms"]; !ok {
		r["t_mono_ms"] = float64(now.Sub(o.start).Nanoseconds()) / 1e6
	}
	b, err := json.Marshal(r)
	if err != nil {
		klog.ErrorS(err, "record not written")
		return
	}
	b = append(b, '\n')
	if _, err := o.w.Write(b); err != nil {
		klog.ErrorS(err, "record not written")
	}
}

// at stamps a record with a start time and the time since.
func at(r rec, o *out, start time.Time) rec {
	r["t_unix_ms"] = float64(start.UnixNano()) / 1e6
	r["t_mono_ms"] = float64(start.Sub(o.start).Nanoseconds()) / 1e6
	r["duration_ms"] = float64(time.Since(start).Nanoseconds()) / 1e6
	return r
}

func errText(err error) any {
	if err == nil {
		return nil
	}
	return err.Error()
}

// status is the HTTP status an API error carries (0 when none).
func status(err error) int32 {
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		return s.Status().Code
	}
	return 0
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cpmlab-clientgo informer|elect|version [flags]")
		os.Exit(2)
	}
	klog.InitFlags(nil)
	role, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet(role, flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the API to reach")
	outPath := fs.String("out", "-", "where records go (- for stdout)")
	namespace := fs.String("namespace", "cpmlab-probe", "namespace of the ConfigMaps (informer) or the Lease (elect)")
	// informer
	counter := fs.String("counter", "cpmlab-counter", "the ConfigMap whose every state is recorded (informer)")
	resync := fs.Duration("resync", 0, "the informer's resync period (client-go: 0, none)")
	// elect: client-go's recommended defaults, which Gardener's components
	// keep (pkg/apis/config/resourcemanager/v1alpha1/defaults.go ->
	// component-base's RecommendedDefaultLeaderElectionConfiguration).
	lease := fs.String("lease", "cpmlab-leader", "the Lease (elect)")
	identity := fs.String("identity", "", "this candidate's identity (elect)")
	seed := fs.String("seed", "", "the seed this candidate runs in (elect; recorded)")
	leaseDuration := fs.Duration("lease-duration", 15*time.Second, "how long a lease is held without renewal")
	renewDeadline := fs.Duration("renew-deadline", 10*time.Second, "how long the leader retries renewing before it gives up")
	retryPeriod := fs.Duration("retry-period", 2*time.Second, "how often candidates try to acquire or renew")
	if role == "version" || role == "--version" {
		fmt.Printf("cpmlab-clientgo %s (k8s.io/client-go %s)\n", version, clientVersion())
		return
	}
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "--kubeconfig is required")
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubeconfig %s: %v\n", *kubeconfig, err)
		os.Exit(2)
	}
	cfg.UserAgent = "cpmlab-clientgo/" + role
	var w io.Writer = os.Stdout
	if *outPath != "-" {
		f, err := os.OpenFile(*outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", *outPath, err)
			os.Exit(3)
		}
		defer f.Close()
		w = f
	}
	o := &out{w: w, start: time.Now()}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	switch role {
	case "informer":
		err = runInformer(ctx, o, cfg, *namespace, *counter, *resync)
	case "elect":
		if *identity == "" {
			fmt.Fprintln(os.Stderr, "--identity is required")
			os.Exit(2)
		}
		err = runElect(ctx, o, cfg, *namespace, *lease, *identity, *seed, *leaseDuration, *renewDeadline, *retryPeriod)
	default:
		fmt.Fprintf(os.Stderr, "unknown role %q (informer, elect, version)\n", role)
		os.Exit(2)
	}
	if err != nil {
		o.write(rec{"kind": "setup-failed", "error": err.Error()})
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// counterValue is the counter's value as the probes' writer stores it.
func counterValue(cm *corev1.ConfigMap) any {
	if cm == nil {
		return nil
	}
	if v, err := strconv.ParseUint(cm.Data["value"], 10, 64); err == nil {
		return v
	}
	return nil
}

func rvOf(obj metav1.Object) any {
	if v, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64); err == nil {
		return v
	}
	return obj.GetResourceVersion()
}

// recordingWatch passes a watch's events on and records what a reflector
// receives: every state of the counter (`init-apply` while a streaming
// list sends its initial events, `apply` after), its deletion, the end of
// a streaming list's initial events (`synced`), an ERROR event (410 Gone
// as `expired`), and the end of the stream (`watch-closed`: client-go's
// stream watcher ends quietly on EOF and on a reset it takes for one, and
// reports other stream failures as ERROR events).
type recordingWatch struct {
	watch.Interface
	result chan watch.Event
}

func newRecordingWatch(ctx context.Context, w watch.Interface, o *out, counter string, streaming bool) *recordingWatch {
	r := &recordingWatch{Interface: w, result: make(chan watch.Event)}
	start := time.Now()
	go func() {
		defer close(r.result)
		initial := streaming
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Error:
				if ctx.Err() != nil {
					// The informer is stopping: its own cancellation
					// ends the stream, which client-go reports as an
					// error ("context canceled"); not the server's.
					break
				}
				st := apierrors.FromObject(ev.Object)
				kind := "watch-error"
				if apierrors.IsResourceExpired(st) || apierrors.IsGone(st) {
					kind = "expired"
				}
				o.write(rec{"kind": kind, "http_status": status(st), "error": st.Error()})
			case watch.Bookmark:
				if m, err := meta.Accessor(ev.Object); err == nil && initial &&
					m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
					initial = false
					o.write(rec{"kind": "synced", "rv": rvOf(m)})
				}
			case watch.Added, watch.Modified, watch.Deleted:
				cm, ok := ev.Object.(*corev1.ConfigMap)
				if !ok || cm.Name != counter {
					break
				}
				kind := "apply"
				if ev.Type == watch.Deleted {
					kind = "delete"
				} else if initial {
					kind = "init-apply"
				}
				o.write(rec{"kind": kind, "name": cm.Name, "rv": rvOf(cm), "value": counterValue(cm)})
			}
			r.result <- ev
		}
		o.write(rec{"kind": "watch-closed", "after_ms": float64(time.Since(start).Nanoseconds()) / 1e6})
	}()
	return r
}

func (r *recordingWatch) ResultChan() <-chan watch.Event { return r.result }

// runInformer runs a shared informer as controllers do (a reflector's list
// and watch with bookmarks, re-list on 410 Gone, client-go's backoff) and
// records what it does and what it delivers.
func runInformer(ctx context.Context, o *out, cfg *rest.Config, namespace, counter string, resync time.Duration) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	lists := 0
	// A (re)list is a LIST (paged: `continue` pages belong to the one
	// before) or, with client-go's WatchListClient (on by default since
	// 1.35) and a server that serves it, a watch with sendInitialEvents.
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			if opts.Continue == "" {
				lists++
				o.write(rec{"kind": "init", "relist": lists > 1})
			}
			start := time.Now()
			l, err := client.CoreV1().ConfigMaps(namespace).List(ctx, opts)
			r := rec{"kind": "list", "relist": lists > 1, "ok": err == nil, "error": errText(err), "http_status": status(err)}
			if l != nil && err == nil {
				r["rv"] = l.ResourceVersion
				r["items"] = len(l.Items)
			}
			o.write(at(r, o, start))
			if err == nil && l != nil {
				for i := range l.Items {
					if cm := &l.Items[i]; cm.Name == counter {
						o.write(rec{"kind": "init-apply", "name": cm.Name, "rv": rvOf(cm), "value": counterValue(cm)})
					}
				}
				if l.Continue == "" {
					o.write(rec{"kind": "synced", "rv": l.ResourceVersion})
				}
			}
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			streaming := opts.SendInitialEvents != nil && *opts.SendInitialEvents
			if streaming {
				lists++
				o.write(rec{"kind": "init", "relist": lists > 1, "streaming": true})
			}
			start := time.Now()
			w, err := client.CoreV1().ConfigMaps(namespace).Watch(ctx, opts)
			o.write(at(rec{"kind": "watch", "from_rv": opts.ResourceVersion, "streaming": streaming, "ok": err == nil, "error": errText(err), "http_status": status(err)}, o, start))
			if err != nil {
				return nil, err
			}
			return newRecordingWatch(ctx, w, o, counter, streaming), nil
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, resync, cache.Indexers{})
	// What the controller's handlers get (after the DeltaFIFO): `handler`
	// records with the handler's name, beside the reflector's view above.
	seen := func(kind string, cm *corev1.ConfigMap) {
		if cm.Name != counter {
			return
		}
		o.write(rec{"kind": "handler", "handler": kind, "name": cm.Name, "rv": rvOf(cm), "value": counterValue(cm)})
	}
	_, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				seen("add", cm)
			}
		},
		UpdateFunc: func(old, obj any) {
			cm, ok := obj.(*corev1.ConfigMap)
			prev, ok2 := old.(*corev1.ConfigMap)
			if !ok || !ok2 {
				return
			}
			if cm.ResourceVersion == prev.ResourceVersion {
				seen("resync", cm)
				return
			}
			seen("update", cm)
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				seen("delete", cm)
			}
		},
	})
	if err != nil {
		return err
	}
	o.write(rec{"kind": "start", "namespace": namespace, "counter": counter, "client_go": clientVersion()})
	go inf.RunWithContext(ctx)
	if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		o.write(rec{"kind": "synced"})
	}
	<-ctx.Done()
	o.write(rec{"kind": "stop"})
	return nil
}

// remoteAddr keeps the address of the connection the last request went
// over, so a candidate's records show which gateway it reached.
type remoteAddr struct {
	mu   sync.Mutex
	addr string
}

func (a *remoteAddr) get() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addr
}

// tracing wraps a transport so that every request notes its connection's
// remote address.
func (a *remoteAddr) tracing(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
			a.mu.Lock()
			a.addr = info.Conn.RemoteAddr().String()
			a.mu.Unlock()
		}}
		return rt.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// recordingLock is a Lease lock that records every call client-go's
// elector makes of it, with its latency and the lease as read or written.
type recordingLock struct {
	resourcelock.Interface
	o    *out
	addr *remoteAddr
}

func leaseFields(r rec, ler *resourcelock.LeaderElectionRecord) rec {
	if ler != nil {
		r["holder"] = ler.HolderIdentity
		r["renew_time_unix_ms"] = float64(ler.RenewTime.UnixNano()) / 1e6
		r["acquire_time_unix_ms"] = float64(ler.AcquireTime.UnixNano()) / 1e6
		r["transitions"] = ler.LeaderTransitions
	}
	return r
}

func (l *recordingLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	start := time.Now()
	ler, raw, err := l.Interface.Get(ctx)
	r := rec{"kind": "op", "op": "get", "ok": err == nil, "error": errText(err), "http_status": status(err), "addr": l.addr.get()}
	l.o.write(at(leaseFields(r, ler), l.o, start))
	return ler, raw, err
}

func (l *recordingLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := time.Now()
	err := l.Interface.Create(ctx, ler)
	r := rec{"kind": "op", "op": "create", "ok": err == nil, "error": errText(err), "http_status": status(err), "addr": l.addr.get()}
	l.o.write(at(leaseFields(r, &ler), l.o, start))
	return err
}

func (l *recordingLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := time.Now()
	err := l.Interface.Update(ctx, ler)
	r := rec{"kind": "op", "op": "update", "ok": err == nil, "error": errText(err), "http_status": status(err), "addr": l.addr.get()}
	l.o.write(at(leaseFields(r, &ler), l.o, start))
	return err
}

// runElect runs one candidate until the context ends, standing again after
// it lost the lease (as a restarted component would), and records every
// acquire, loss and new leader it sees.
func runElect(ctx context.Context, o *out, cfg *rest.Config, namespace, name, identity, seed string, leaseDuration, renewDeadline, retryPeriod time.Duration) error {
	addr := &remoteAddr{}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(addr.tracing)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	lock := &recordingLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
		},
		o:    o,
		addr: addr,
	}
	o.write(rec{"kind": "start", "identity": identity, "seed": seed, "lease": namespace + "/" + name,
		"lease_duration_ms": leaseDuration.Milliseconds(), "renew_deadline_ms": renewDeadline.Milliseconds(),
		"retry_period_ms": retryPeriod.Milliseconds(), "client_go": clientVersion()})
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   leaseDuration,
			RenewDeadline:   renewDeadline,
			RetryPeriod:     retryPeriod,
			ReleaseOnCancel: true,
			Name:            name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { o.write(rec{"kind": "started-leading"}) },
				OnStoppedLeading: func() { o.write(rec{"kind": "stopped-leading"}) },
				OnNewLeader:      func(h string) { o.write(rec{"kind": "new-leader", "holder": h}) },
			},
		})
		if err != nil {
			return err
		}
		le.Run(ctx)
	}
	o.write(rec{"kind": "stop"})
	return nil
}

// clientGoVersion is the client-go this binary was built with (set by
// scripts/build-go).
var clientGoVersion = "unknown"

// version is this program's (set by scripts/build-go).
var version = "unknown"

func clientVersion() string {
	return clientGoVersion
}
