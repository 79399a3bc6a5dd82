package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// fakeSidecar answers as backup-restore's server does: `New` until asked
// to start, `Progress` once, `Successful` once, then `New` again; and the
// member's configuration with druid's keys etcd's loader does not know.
type fakeSidecar struct {
	mu       sync.Mutex
	status   string
	modes    []string
	config   string
	progress int
}

func (f *fakeSidecar) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.URL.Path {
	case "/initialization/status":
		s := f.status
		switch s {
		case "Progress":
			f.progress++
			if f.progress > 1 {
				f.status = "Successful"
			}
		case "Successful":
			f.status = "New"
		}
		fmt.Fprint(w, s)
	case "/initialization/start":
		if f.status == "New" {
			f.modes = append(f.modes, r.URL.Query().Get("mode"))
			f.status = "Progress"
		}
	case "/config":
		fmt.Fprint(w, f.config)
	default:
		http.NotFound(w, r)
	}
}

func TestStartsEtcdAfterTheSidecarInitialisedItAndStopsOnRequest(t *testing.T) {
	dataRoot := t.TempDir()
	cp, pp, wp := freePort(t), freePort(t), freePort(t)
	// The last run stopped gracefully: this start asks for the sanity
	// check, and forgets the note once etcd runs.
	if err := os.WriteFile(filepath.Join(dataRoot, exitCodeFile), []byte("terminated"), 0o600); err != nil {
		t.Fatal(err)
	}
	side := &fakeSidecar{status: "New", config: strings.Join([]string{
		"name: etcd-main-0",
		"data-dir: " + filepath.Join(dataRoot, "new.etcd"),
		fmt.Sprintf("listen-client-urls: http://127.0.0.1:%d", cp),
		fmt.Sprintf("advertise-client-urls: http://127.0.0.1:%d", cp),
		fmt.Sprintf("listen-peer-urls: http://127.0.0.1:%d", pp),
		fmt.Sprintf("initial-advertise-peer-urls: http://127.0.0.1:%d", pp),
		fmt.Sprintf("initial-cluster: etcd-main-0=http://127.0.0.1:%d", pp),
		"initial-cluster-state: new",
		"initial-cluster-token: etcd-cluster",
		"snapshot-count: 10000",
		"next-cluster-version-compatible: true",
		"member-name-prefix: ''",
		"",
	}, "\n")}
	srv := httptest.NewServer(side)
	defer srv.Close()
	home := t.TempDir()
	t.Setenv("HOME", home)

	done := make(chan int, 1)
	go func() {
		done <- run([]string{
			"start-etcd",
			"--backup-restore-host-port=" + strings.TrimPrefix(srv.URL, "http://"),
			"--etcd-server-name=127.0.0.1",
			fmt.Sprintf("--etcd-client-port=%d", cp),
			fmt.Sprintf("--etcd-wrapper-port=%d", wp),
			"--backup-restore-tls-enabled=false",
			"--data-root=" + dataRoot,
			"--poll-interval=50ms",
			"--ready-interval=100ms",
		})
	}()

	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", wp)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(readyz)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case code := <-done:
			t.Fatalf("the launcher exited (%d) before it was ready", code)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never answered 200 (last: %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	side.mu.Lock()
	modes := append([]string(nil), side.modes...)
	side.mu.Unlock()
	if len(modes) != 1 || modes[0] != "sanity" {
		t.Fatalf("initialisation modes asked: %v, want [sanity]", modes)
	}
	if _, err := os.Stat(filepath.Join(dataRoot, exitCodeFile)); !os.IsNotExist(err) {
		t.Fatalf("exit_code still there once etcd ran: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(home, "etcd.conf.yaml")); err != nil || !strings.Contains(string(b), "etcd-main-0") {
		t.Fatalf("the served configuration was not kept: %v %q", err, b)
	}

	// A GET is no stop request; a POST is.
	stop := fmt.Sprintf("http://127.0.0.1:%d/stop", wp)
	resp, err := http.Get(stop)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /stop: %d", resp.StatusCode)
	}
	resp, err = http.Post(stop, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit code %d after POST /stop", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the launcher did not stop after POST /stop")
	}
}

func TestRefusesAnythingButStartEtcd(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"etcd"},
		{"start-etcd", "--backup-restore-host-port=http://x:8080"},
		{"start-etcd", "--backup-restore-tls-enabled=true"},
		{"start-etcd", "extra"},
	} {
		if code := run(args); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}
