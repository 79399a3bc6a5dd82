// cpmlab-etcd-launcher starts an etcd member the way etcd-druid's
// StatefulSet expects its etcd container to: the `start-etcd` contract of
// gardener/etcd-wrapper, whose image the lab cannot fetch. It is the lab's
// own code, written to that contract (docs/etcd-druid.md says where each
// rule comes from):
//
//  1. Ask the backup-restore sidecar to initialise the member's data
//     (`GET /initialization/status`; on `New`, `GET /initialization/start`
//     with mode `sanity` after a graceful stop, else `full`), once a
//     second, until it answers `Successful`. etcd must not run meanwhile:
//     the sidecar opens the database.
//  2. Fetch the member's configuration (`GET /config`: the ConfigMap with
//     this member's name, URLs and initial cluster filled in) and start an
//     embedded etcd with it (go.etcd.io/etcd/server/v3, the version
//     backup-restore v0.44.1 embeds).
//  3. Serve `/readyz` (a linearizable read through the member's client
//     port, every 2 s) and `POST /stop` (the sidecar's restart request
//     after it changed the member's peer URLs) on the wrapper port.
//  4. On SIGTERM or SIGINT note why in the data volume (`exit_code`, read
//     by the next start to choose the validation mode) and stop etcd
//     gracefully; a second signal exits at once.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"sigs.k8s.io/yaml"
)

// What the sidecar's initialisation status says (its body, verbatim).
const (
	statusNew        = "New"
	statusSuccessful = "Successful"
)

// Files in the member's data volume.
const (
	exitCodeFile         = "exit_code"
	legacyValidationFile = "validation_marker"
)

type options struct {
	wrapperPort  int
	brTLS        bool
	brHostPort   string
	brCABundle   string
	serverName   string
	clientPort   int
	clientCert   string
	clientKey    string
	readyTimeout time.Duration
	dataRoot     string
	pollInterval time.Duration
	readyEvery   time.Duration
}

func parse(args []string) (*options, error) {
	if len(args) == 0 || args[0] != "start-etcd" {
		return nil, errors.New("usage: cpmlab-etcd-launcher start-etcd [flags] (the one command etcd-druid's StatefulSet runs)")
	}
	o := &options{}
	fs := flag.NewFlagSet("start-etcd", flag.ContinueOnError)
	fs.IntVar(&o.wrapperPort, "etcd-wrapper-port", 9095, "port of /readyz and /stop")
	fs.BoolVar(&o.brTLS, "backup-restore-tls-enabled", false, "the sidecar serves HTTPS")
	fs.StringVar(&o.brHostPort, "backup-restore-host-port", ":8080", "the sidecar's host:port")
	fs.StringVar(&o.brCABundle, "backup-restore-ca-cert-bundle-path", "", "CA bundle the sidecar's certificate is checked against")
	fs.StringVar(&o.serverName, "etcd-server-name", "", "host name of this member's client endpoint (and its certificate's)")
	fs.IntVar(&o.clientPort, "etcd-client-port", 2379, "this member's client port")
	fs.StringVar(&o.clientCert, "etcd-client-cert-path", "", "client certificate for the readiness read")
	fs.StringVar(&o.clientKey, "etcd-client-key-path", "", "its key")
	fs.DurationVar(&o.readyTimeout, "etcd-ready-timeout", 0, "accepted for the contract; etcd's readiness is served by /readyz")
	fs.StringVar(&o.dataRoot, "data-root", "/var/etcd/data", "the member's data volume (not part of the contract: for tests)")
	fs.DurationVar(&o.pollInterval, "poll-interval", time.Second, "between the sidecar's status polls (not part of the contract)")
	fs.DurationVar(&o.readyEvery, "ready-interval", 2*time.Second, "between readiness reads (not part of the contract)")
	if err := fs.Parse(args[1:]); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("start-etcd: unexpected arguments %q", fs.Args())
	}
	if !strings.Contains(o.brHostPort, ":") || strings.Contains(o.brHostPort, "://") {
		return nil, fmt.Errorf("--backup-restore-host-port %q: want host:port", o.brHostPort)
	}
	if o.brTLS && o.brCABundle == "" {
		return nil, errors.New("--backup-restore-tls-enabled needs --backup-restore-ca-cert-bundle-path")
	}
	return o, nil
}

// sidecar talks to etcd-backup-restore's HTTP server.
type sidecar struct {
	base   string
	client *http.Client
}

func newSidecar(o *options) (*sidecar, error) {
	scheme := "http"
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if o.brTLS {
		scheme = "https"
		pem, err := os.ReadFile(o.brCABundle)
		if err != nil {
			return nil, fmt.Errorf("the sidecar's CA bundle: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the sidecar's CA bundle %s holds no certificate", o.brCABundle)
		}
		host, _, _ := net.SplitHostPort(o.brHostPort)
		if host == "" {
			host = "localhost"
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12}
	}
	return &sidecar{
		base:   scheme + "://" + o.brHostPort,
		client: &http.Client{Transport: tr, Timeout: time.Minute},
	}, nil
}

func (s *sidecar) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("GET %s: HTTP %d %s", path, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// validationMode is `sanity` after a graceful stop (the exit code the last
// run noted), `full` otherwise.
func validationMode(dataRoot string) string {
	_ = os.Remove(filepath.Join(dataRoot, legacyValidationFile))
	b, err := os.ReadFile(filepath.Join(dataRoot, exitCodeFile))
	if err != nil {
		return "full"
	}
	switch strings.TrimSpace(string(b)) {
	case "terminated", "interrupt":
		return "sanity"
	}
	return "full"
}

// initialise asks the sidecar to validate (and, where it must, restore or
// re-add) the member's data, until it says it succeeded. The sidecar says
// `Successful` once and then `New` again; `Progress`, `Failed` (it starts
// again on the next `New`) and errors are waited out.
func initialise(ctx context.Context, s *sidecar, o *options) error {
	for {
		body, err := s.get(ctx, "/initialization/status")
		status := strings.TrimSpace(string(body))
		switch {
		case err != nil:
			log.Printf("initialisation status: %v", err)
		case status == statusSuccessful:
			log.Printf("the sidecar initialised the member's data")
			return nil
		case status == statusNew:
			mode := validationMode(o.dataRoot)
			log.Printf("asking the sidecar to initialise the member's data (mode %s)", mode)
			if _, err := s.get(ctx, "/initialization/start?mode="+url.QueryEscape(mode)); err != nil {
				log.Printf("initialisation start: %v", err)
			}
		default:
			log.Printf("initialisation: %s", status)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(o.pollInterval):
		}
	}
}

// memberConfig fetches the member's configuration from the sidecar (five
// tries a second apart) and loads it as etcd's own configuration file.
func memberConfig(ctx context.Context, s *sidecar) (*embed.Config, error) {
	var body []byte
	var err error
	for try := 1; try <= 5; try++ {
		if body, err = s.get(ctx, "/config"); err == nil {
			break
		}
		log.Printf("member configuration, try %d of 5: %v", try, err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the sidecar served no member configuration: %w", err)
	}
	// The user's home, as etcd-wrapper keeps it, else the temporary
	// directory: made if missing (an image from scratch has neither).
	dirs := []string{os.TempDir()}
	if home, err := os.UserHomeDir(); err == nil && home != "" && home != "/" {
		dirs = append([]string{home}, dirs...)
	}
	var path string
	for _, dir := range dirs {
		path = filepath.Join(dir, "etcd.conf.yaml")
		if err = os.MkdirAll(dir, 0o700); err == nil {
			if err = os.WriteFile(path, body, 0o600); err == nil {
				break
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("keeping the member configuration: %w", err)
	}
	cfg, err := embed.ConfigFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("the member configuration the sidecar served: %w", err)
	}
	// etcd 3.5's file loader has no key for it; etcd-druid renders it.
	var peer struct {
		PeerTLS struct {
			SkipClientSANVerification bool `json:"skip-client-san-verification"`
		} `json:"peer-transport-security"`
	}
	if err := yaml.Unmarshal(body, &peer); err == nil {
		cfg.PeerTLSInfo.SkipClientSANVerify = peer.PeerTLS.SkipClientSANVerification
	}
	return cfg, nil
}

func clientTLS(cfg *embed.Config) bool {
	t := cfg.ClientTLSInfo
	return t.CertFile != "" && t.KeyFile != "" && t.TrustedCAFile != ""
}

// readiness reads a key through the member's own client endpoint, as a
// client would (a linearizable read: ready only with a quorum).
func readiness(ctx context.Context, cfg *embed.Config, o *options, ready *atomic.Bool) error {
	scheme := "http"
	var tlsCfg *tls.Config
	if clientTLS(cfg) {
		scheme = "https"
		info := transport.TLSInfo{
			CertFile:      o.clientCert,
			KeyFile:       o.clientKey,
			TrustedCAFile: cfg.ClientTLSInfo.TrustedCAFile,
			ServerName:    o.serverName,
		}
		var err error
		if tlsCfg, err = info.ClientConfig(); err != nil {
			return fmt.Errorf("the readiness client's TLS: %w", err)
		}
	}
	host := o.serverName
	if host == "" {
		host = "localhost"
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{fmt.Sprintf("%s://%s", scheme, net.JoinHostPort(host, fmt.Sprint(o.clientPort)))},
		DialTimeout: 5 * time.Second,
		TLS:         tlsCfg,
	})
	if err != nil {
		return err
	}
	go func() {
		defer c.Close()
		for {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := c.Get(rctx, "foo")
			cancel()
			ready.Store(err == nil)
			select {
			case <-ctx.Done():
				return
			case <-time.After(o.readyEvery):
			}
		}
	}()
	return nil
}

func serve(cfg *embed.Config, o *options, ready *atomic.Bool, stop context.CancelFunc) (*http.Server, <-chan error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/stop", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		log.Printf("asked to stop (POST /stop): stopping etcd")
		stop()
		w.WriteHeader(http.StatusOK)
	})
	srv := &http.Server{Addr: fmt.Sprintf(":%d", o.wrapperPort), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() {
		var err error
		if clientTLS(cfg) {
			err = srv.ListenAndServeTLS(cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile)
		} else {
			err = srv.ListenAndServe()
		}
		if !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("the wrapper port %d: %w", o.wrapperPort, err)
		}
	}()
	return srv, errc
}

// signals cancels the context on the first SIGTERM or SIGINT, after noting
// it in the data volume; a second one exits at once.
func signals(o *options, cancel context.CancelFunc) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, os.Interrupt)
	go func() {
		sig := <-ch
		name := "terminated"
		if sig == os.Interrupt {
			name = "interrupt"
		}
		if err := os.WriteFile(filepath.Join(o.dataRoot, exitCodeFile), []byte(name), 0o600); err != nil {
			log.Printf("noting the exit code: %v", err)
		}
		log.Printf("%s: stopping etcd", sig)
		cancel()
		<-ch
		log.Printf("a second signal: exiting at once")
		os.Exit(1)
	}()
}

func run(args []string) int {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds | log.LUTC)
	o, err := parse(args)
	if err != nil {
		log.Print(err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals(o, cancel)
	s, err := newSidecar(o)
	if err != nil {
		log.Print(err)
		return 1
	}
	if err := initialise(ctx, s, o); err != nil {
		log.Printf("initialisation: %v", err)
		return 1
	}
	cfg, err := memberConfig(ctx, s)
	if err != nil {
		log.Print(err)
		return 1
	}
	syscall.Umask(0o077)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Printf("starting etcd: %v", err)
		return 1
	}
	defer e.Close()
	_ = os.Remove(filepath.Join(o.dataRoot, exitCodeFile))
	log.Printf("etcd member %s started (data %s)", cfg.Name, cfg.Dir)

	var ready atomic.Bool
	if err := readiness(ctx, cfg, o, &ready); err != nil {
		log.Print(err)
		return 1
	}
	srv, srvErr := serve(cfg, o, &ready, cancel)
	defer srv.Close()

	select {
	case <-ctx.Done():
		log.Printf("stopping etcd member %s", cfg.Name)
		return 0
	case <-e.Server.StopNotify():
		log.Printf("etcd stopped")
		return 0
	case err := <-e.Err():
		log.Printf("etcd: %v", err)
		return 1
	case err := <-srvErr:
		log.Print(err)
		return 1
	}
}

func main() {
	os.Exit(run(os.Args[1:]))
}
