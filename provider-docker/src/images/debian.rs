//! The lab image's base built in containers, from a Debian bookworm image:
//! the registry's `debian:bookworm-slim` where a registry is reachable (a
//! laptop, GitHub's runners), else `cpmlab/debian:bookworm`, which
//! `scripts/debian-base` makes with debootstrap where none is (this
//! project's machines). Debian's packages (bind9, iproute2, nftables,
//! iptables, iperf3, busybox) are installed by apt in a build container;
//! etcd and Envoy, which Debian does not package at the versions the lab
//! runs, are copied in from where `scripts/build-go` and
//! `scripts/fetch-envoy` put them. Nothing is taken from the host's own
//! package manager or its libraries, so the same steps build the image on
//! any host whose engine runs Linux containers.
//!
//! The tag is a digest of the Dockerfile, the Debian base's image ID and
//! each copied file's size and modification time; the label `cpmlab.base`
//! says which Debian base it was built from.

use std::path::PathBuf;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use super::{
    etcd_34_source, etcd_35_source, size_and_mtime, versions_label, LabImage, APPLETS,
    ETCD_34_IN_IMAGE, ETCD_35_IN_IMAGE, LABEL_ETCD_VERSIONS, REPO,
};
use super::{PartsFrom, Target, LAB_DIRS};
use crate::engine::Engine;
use crate::errors::{BadInput, EnvNotReady};
use crate::topology::EtcdVersion;
use crate::LABEL_IMAGE;

/// The setting that chooses the lab image's base.
pub const BASE_ENV: &str = "CPMLAB_IMAGE_BASE";

/// The registry's Debian image, as Docker Hub serves it.
pub const REGISTRY_BASE: &str = "debian:bookworm-slim";

/// Names another registry reference for it (a mirror: `mirror.example/debian:bookworm-slim`).
pub const REGISTRY_BASE_ENV: &str = "CPMLAB_DEBIAN_IMAGE";

/// The registry reference the build starts from: `CPMLAB_DEBIAN_IMAGE`, else Docker Hub's.
pub fn registry_base() -> String {
    std::env::var(REGISTRY_BASE_ENV)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| REGISTRY_BASE.to_string())
}

/// The Debian image `scripts/debian-base` makes with debootstrap and loads
/// with `docker import`, where no registry is reachable.
pub const LOCAL_BASE: &str = "cpmlab/debian:bookworm";

/// The Debian image of another architecture than the engine's, which the
/// engine runs by emulation: `scripts/debian-base --arch <arch>` makes it
/// from `scripts/build-arch`'s first stage (`cpmlab/debian:bookworm-arm64`).
/// The registry's tag is never pulled for it: pulled for arm64 it would
/// take the place of the engine's own amd64 image of that tag.
pub fn emulated_base(arch: &str) -> String {
    format!("{LOCAL_BASE}-{arch}")
}

fn emulated_fix(arch: &str) -> String {
    format!(
        "scripts/setup --{arch} (scripts/emulation {arch}, scripts/build-arch {arch}, then scripts/debian-base --arch {arch} makes {})",
        emulated_base(arch)
    )
}

/// Image label: which base the lab image was built from (`registry
/// debian:bookworm-slim sha256:…`, `local cpmlab/debian:bookworm sha256:…`,
/// or `host`).
pub const LABEL_BASE: &str = "cpmlab.base";

/// Bumped whenever the steps below change, to force a rebuild.
const STEPS_VERSION: &str = "1";

/// Debian bookworm's packages the lab's roles run: DNS (named, nsupdate,
/// dig), routes and shaping (ip, tc, ss), the router's rules (nft,
/// iptables), iperf3 for the link's benchmarks, busybox for a shell and
/// small tools, and etcdctl.
pub const PACKAGES: &[&str] = &[
    "bind9",
    "bind9-dnsutils",
    "iproute2",
    "iptables",
    "nftables",
    "iperf3",
    "busybox-static",
    "etcd-client",
];

/// Where the lab image's base comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaseSource {
    /// The registry's Debian image where the engine has it or can pull
    /// it, else the local one; an error naming both fixes where neither.
    Auto,
    /// The registry's `debian:bookworm-slim`, pulled where missing.
    Registry,
    /// `cpmlab/debian:bookworm`, made by `scripts/debian-base`.
    Local,
    /// The host's own binaries and libraries, packed with `docker import`
    /// (a Debian host only; the way before the container build).
    Host,
}

impl BaseSource {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "auto" => Self::Auto,
            "registry" => Self::Registry,
            "local" => Self::Local,
            "host" => Self::Host,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Registry => "registry",
            Self::Local => "local",
            Self::Host => "host",
        }
    }

    /// `CPMLAB_IMAGE_BASE`, `auto` when unset; any other value is bad input.
    pub fn from_env() -> Result<Self, BadInput> {
        match std::env::var(BASE_ENV) {
            Err(_) => Ok(Self::Auto),
            Ok(v) if v.is_empty() => Ok(Self::Auto),
            Ok(v) => Self::parse(&v).ok_or_else(|| {
                BadInput(format!(
                    "{BASE_ENV}={v}: not one of auto, registry, local, host"
                ))
            }),
        }
    }
}

/// The Debian image a build starts from: its reference, its image ID and
/// which way it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebianBase {
    pub reference: String,
    pub id: String,
    pub source: BaseSource,
}

impl DebianBase {
    /// The `cpmlab.base` label's value.
    pub fn label(&self) -> String {
        format!("{} {} {}", self.source.as_str(), self.reference, self.id)
    }
}

fn local_fix() -> String {
    format!("run scripts/debian-base (scripts/setup does) to make {LOCAL_BASE} with debootstrap")
}

/// Finds the Debian base `source` asks for, pulling the registry's when
/// that is allowed and it is missing. `pull: false` never pulls (doctor's
/// view); a base it cannot find is then an environment not ready, with
/// the command that gets it. Under emulation (`target.emulated()`) the
/// base is `emulated_base`, whatever `source` says.
pub async fn find(
    engine: &Engine,
    source: BaseSource,
    pull: bool,
    target: &Target,
) -> Result<DebianBase> {
    if target.emulated() {
        let reference = emulated_base(&target.arch);
        return match engine.image_id_arch(&reference).await? {
            Some((id, a)) if a == target.arch => Ok(DebianBase {
                reference,
                id,
                source: BaseSource::Local,
            }),
            Some((_, a)) => Err(EnvNotReady::new(
                format!("{reference} is an image of {a}, not of {}", target.arch),
                format!("remove it (`docker rmi {reference}`), then {}", emulated_fix(&target.arch)),
            )
            .into()),
            None => Err(EnvNotReady::new(
                format!(
                    "a {} lab image on this {} engine is built from {reference}, which the engine does not have",
                    target.platform(),
                    target.engine_platform()
                ),
                emulated_fix(&target.arch),
            )
            .into()),
        };
    }
    let arch = target.from.arch();
    let registry = registry_base();
    // An image of another architecture than the engine's parts (the local
    // amd64 image on an arm64 engine) is not a base for them.
    let usable = |id: Option<(String, String)>| {
        id.filter(|(_, a)| arch.is_none_or(|want| a == want))
            .map(|(id, _)| id)
    };
    let found = |reference: &str, id: String, source| DebianBase {
        reference: reference.to_string(),
        id,
        source,
    };
    if source == BaseSource::Host {
        anyhow::bail!("the host's binaries are not a Debian base");
    }
    if source != BaseSource::Local {
        if let Some(id) = usable(engine.image_id_arch(&registry).await?) {
            return Ok(found(&registry, id, BaseSource::Registry));
        }
    }
    if source != BaseSource::Registry {
        if let Some(id) = usable(engine.image_id_arch(LOCAL_BASE).await?) {
            return Ok(found(LOCAL_BASE, id, BaseSource::Local));
        }
    }
    let missing = match source {
        BaseSource::Local => format!("{BASE_ENV}=local and the engine has no {LOCAL_BASE}"),
        BaseSource::Registry => format!("{BASE_ENV}=registry and the engine has no {registry}"),
        _ => format!(
            "the lab image is built from a Debian image, and the engine has neither {registry} nor {LOCAL_BASE}"
        ),
    };
    if source == BaseSource::Local || !pull {
        let fix = match source {
            BaseSource::Local => local_fix(),
            BaseSource::Registry => format!("cpmlab images build (pulls {registry})"),
            _ => format!(
                "cpmlab images build (pulls {registry}), or where no registry is reachable {}",
                local_fix()
            ),
        };
        return Err(EnvNotReady::new(missing, fix).into());
    }
    match pull_image(engine, &registry).await {
        Ok(id) => Ok(found(&registry, id, BaseSource::Registry)),
        Err(e) => Err(EnvNotReady::new(
            format!("{missing}, and its pull failed: {e:#}"),
            match source {
                BaseSource::Registry => format!(
                    "make the registry reachable (or name a mirror with {REGISTRY_BASE_ENV}), or set {BASE_ENV}=local and {}",
                    local_fix()
                ),
                _ => format!("{}, or make a registry reachable", local_fix()),
            },
        )
        .into()),
    }
}

/// `docker pull` of `reference`; its image ID.
async fn pull_image(engine: &Engine, reference: &str) -> Result<String> {
    use futures_util::StreamExt;
    let (image, tag) = reference.split_once(':').unwrap_or((reference, "latest"));
    let opts = bollard::query_parameters::CreateImageOptionsBuilder::default()
        .from_image(image)
        .tag(tag)
        .build();
    tracing::info!(reference, "pulling the Debian base");
    let mut stream = engine.api.create_image(Some(opts), None, None);
    while let Some(item) = stream.next().await {
        item.with_context(|| format!("docker pull {reference}"))?;
    }
    engine
        .image_id_arch(reference)
        .await?
        .map(|(id, _)| id)
        .with_context(|| {
            format!("docker pull {reference} reported success but the image is missing")
        })
}

/// The files copied into the image: (name in the build context, image
/// path, host path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    pub name: &'static str,
    pub at: &'static str,
    pub from: PathBuf,
}

/// What the build copies in: etcd 3.4 (`scripts/build-go`'s, else
/// Debian's `etcd-server` is installed instead), etcd 3.5 where built,
/// and Envoy.
pub fn copied(from: &PartsFrom) -> Result<Vec<Copied>> {
    if let PartsFrom::Arch { .. } = from {
        // platform::decide checked that the required ones are there.
        return Ok([
            ("etcd-3.4", ETCD_34_IN_IMAGE),
            ("etcd-3.5", ETCD_35_IN_IMAGE),
            ("envoy", crate::gateway::ENVOY_IN_IMAGE),
        ]
        .into_iter()
        .filter_map(|(name, at)| {
            Some(Copied {
                name,
                at,
                from: from.arch_file(name)?,
            })
        })
        .collect());
    }
    let mut v = Vec::new();
    if let Some(p) = etcd_34_source()? {
        v.push(Copied {
            name: "etcd-3.4",
            at: ETCD_34_IN_IMAGE,
            from: p,
        });
    }
    if let Some(p) = etcd_35_source()? {
        v.push(Copied {
            name: "etcd-3.5",
            at: ETCD_35_IN_IMAGE,
            from: p,
        });
    }
    let envoy = crate::go_parts::ENVOY.find().ok_or_else(|| {
        EnvNotReady::new(
            "the lab image needs Envoy (the seed gateways' proxy), and none was found",
            "run scripts/fetch-envoy (scripts/setup does), or set CPMLAB_ENVOY to an envoy binary",
        )
    })?;
    v.push(Copied {
        name: "envoy",
        at: crate::gateway::ENVOY_IN_IMAGE,
        from: envoy.path().clone(),
    });
    Ok(v)
}

/// The etcd versions an image of `copied` holds.
pub fn etcd_versions(copied: &[Copied]) -> Vec<EtcdVersion> {
    let mut v = vec![EtcdVersion::V3_4];
    if copied.iter().any(|c| c.at == ETCD_35_IN_IMAGE) {
        v.push(EtcdVersion::V3_5);
    }
    v
}

/// The Dockerfile of the base: apt in a build container, the lab's
/// directories, busybox's applets ahead of Debian's tools on the PATH (as
/// the lab's scripts were written against them), the copied files.
pub fn dockerfile(
    base: &DebianBase,
    copied: &[Copied],
    versions: &[EtcdVersion],
    arch: Option<&str>,
) -> String {
    let mut packages: Vec<&str> = PACKAGES.to_vec();
    if !copied.iter().any(|c| c.at == ETCD_34_IN_IMAGE) {
        packages.push("etcd-server");
    }
    let mut f = format!("FROM {}\n", base.reference);
    f.push_str(&format!(
        "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {} && rm -rf /var/lib/apt/lists/*\n",
        packages.join(" ")
    ));
    let mut dirs = String::new();
    for (d, mode) in LAB_DIRS {
        dirs.push_str(&format!(" && mkdir -p {d} && chmod {mode:o} {d}"));
    }
    let applets: Vec<&str> = APPLETS.to_vec();
    f.push_str(&format!(
        "RUN for a in {}; do ln -sf /bin/busybox /usr/local/bin/$a; done{dirs}\n",
        applets
            .iter()
            .map(|a| format!("'{a}'"))
            .collect::<Vec<_>>()
            .join(" ")
    ));
    for c in copied {
        f.push_str(&format!("COPY {} {}\n", c.name, c.at));
    }
    f.push_str("ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n");
    if arch == Some("arm64") {
        // etcd 3.4 refuses arm64 without it (v3.4.34 etcdmain/etcd.go,
        // checkSupportArch); 3.5 supports arm64 and ignores it.
        f.push_str("ENV ETCD_UNSUPPORTED_ARCH=arm64\n");
    }
    f.push_str(&format!(
        "LABEL {LABEL_IMAGE}=lab {LABEL_ETCD_VERSIONS}={} {LABEL_BASE}=\"{}\"\n",
        versions_label(versions),
        base.label()
    ));
    f
}

/// The tag: a digest of the steps, the base's ID and the copied files.
pub fn tag(dockerfile: &str, copied: &[Copied]) -> Result<String> {
    let mut h = Sha256::new();
    h.update(STEPS_VERSION);
    h.update(dockerfile);
    for c in copied {
        let (len, mtime) = size_and_mtime(&c.from)?;
        h.update(format!("c {} {} {len} {mtime}\n", c.name, c.at));
    }
    Ok(format!("{REPO}:d{}", hex::encode(&h.finalize()[..8])))
}

/// What a build of the base from `source` would be: its Debian image,
/// the files copied in, the etcd versions, the Dockerfile and the tag.
struct Plan {
    base: DebianBase,
    copied: Vec<Copied>,
    versions: Vec<EtcdVersion>,
    dockerfile: String,
    tag: String,
}

async fn plan(engine: &Engine, source: BaseSource, target: &Target, pull: bool) -> Result<Plan> {
    let from = &target.from;
    let base = find(engine, source, pull, target).await?;
    let copied = copied(from)?;
    let versions = etcd_versions(&copied);
    let dockerfile = dockerfile(&base, &copied, &versions, from.arch());
    let tag = tag(&dockerfile, &copied)?;
    Ok(Plan {
        base,
        copied,
        versions,
        dockerfile,
        tag,
    })
}

/// The tag the base would have now, without building (doctor's view), or
/// why it cannot be known.
pub async fn current_tag(engine: &Engine, source: BaseSource, target: &Target) -> Result<String> {
    Ok(plan(engine, source, target, false).await?.tag)
}

/// The lab image's base, built in a container from the Debian base
/// `source` finds (once per content).
pub async fn ensure(engine: &Engine, source: BaseSource, target: &Target) -> Result<LabImage> {
    let from = &target.from;
    let Plan {
        base,
        copied,
        versions,
        dockerfile,
        tag,
    } = plan(engine, source, target, true).await?;
    let image = LabImage {
        tag: tag.clone(),
        built: false,
        etcd_versions: versions,
        parts: Vec::new(),
        arch: target.arch.clone(),
    };
    if engine.image_exists(&tag).await? {
        return Ok(image);
    }
    // The binary placed as 3.5 must be 3.5, where this host can run it
    // (scripts/build-arch checked another architecture's under qemu).
    if let (Some(c), PartsFrom::Host) = (copied.iter().find(|c| c.at == ETCD_35_IN_IMAGE), from) {
        super::check_etcd_35(&c.from)?;
    }
    let mut files = vec![("Dockerfile".to_string(), dockerfile.into_bytes(), 0o644)];
    for c in &copied {
        let bytes = std::fs::read(&c.from).with_context(|| format!("read {}", c.from.display()))?;
        files.push((c.name.to_string(), bytes, 0o755));
    }
    // apt runs in a container of the base: under emulation, one the
    // engine must be able to run at all.
    let platform = target.emulated().then(|| target.platform());
    if target.emulated() {
        super::check_runs(engine, &base.reference, target).await?;
    }
    tracing::info!(tag, base = %base.label(), "building the lab image's base in a container (apt)");
    super::build(engine, &tag, &files, platform.as_deref()).await?;
    Ok(LabImage {
        built: true,
        ..image
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> DebianBase {
        DebianBase {
            reference: LOCAL_BASE.into(),
            id: "sha256:abc".into(),
            source: BaseSource::Local,
        }
    }

    fn envoy() -> Copied {
        Copied {
            name: "envoy",
            at: "/usr/local/bin/envoy",
            from: PathBuf::from("/nonexistent/envoy"),
        }
    }

    #[test]
    fn the_setting_is_parsed_and_a_bad_value_named() {
        for s in ["auto", "registry", "local", "host"] {
            assert_eq!(BaseSource::parse(s).unwrap().as_str(), s);
        }
        assert_eq!(BaseSource::parse("docker-hub"), None);
    }

    #[test]
    fn debian_s_etcd_is_installed_only_where_none_is_copied() {
        let without = dockerfile(&base(), &[envoy()], &[EtcdVersion::V3_4], None);
        assert!(without.contains(" etcd-server "), "{without}");
        let etcd = Copied {
            name: "etcd-3.4",
            at: ETCD_34_IN_IMAGE,
            from: PathBuf::from("/x/etcd"),
        };
        let with = dockerfile(&base(), &[etcd, envoy()], &[EtcdVersion::V3_4], None);
        assert!(!with.contains("etcd-server"), "{with}");
        assert!(with.contains("COPY etcd-3.4 /usr/bin/etcd\n"), "{with}");
        assert!(with.starts_with("FROM cpmlab/debian:bookworm\n"), "{with}");
        assert!(
            with.contains("cpmlab.base=\"local cpmlab/debian:bookworm sha256:abc\""),
            "{with}"
        );
    }

    #[test]
    fn the_tag_follows_the_base_s_id_and_the_copied_files() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("envoy");
        std::fs::write(&f, b"one").unwrap();
        let c = vec![Copied {
            from: f.clone(),
            ..envoy()
        }];
        let a = tag(&dockerfile(&base(), &c, &[EtcdVersion::V3_4], None), &c).unwrap();
        let other = DebianBase {
            id: "sha256:def".into(),
            ..base()
        };
        let b = tag(&dockerfile(&other, &c, &[EtcdVersion::V3_4], None), &c).unwrap();
        assert_ne!(a, b, "another base, another tag");
        std::fs::write(&f, b"three").unwrap();
        let d = tag(&dockerfile(&base(), &c, &[EtcdVersion::V3_4], None), &c).unwrap();
        assert_ne!(a, d, "a changed file, another tag");
        assert!(a.starts_with("cpmlab/lab:d"), "{a}");
    }

    #[test]
    fn an_arm64_image_takes_the_arm64_builds_and_tells_etcd_3_4_its_arch() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["etcd-3.4", "envoy", "cpmlab"] {
            std::fs::write(dir.path().join(f), b"x").unwrap();
        }
        let from = PartsFrom::Arch {
            arch: "arm64".into(),
            dir: dir.path().to_path_buf(),
        };
        let c = copied(&from).unwrap();
        let names: Vec<_> = c.iter().map(|c| (c.name, c.from.clone())).collect();
        assert_eq!(
            names,
            [
                ("etcd-3.4", dir.path().join("etcd-3.4")),
                ("envoy", dir.path().join("envoy"))
            ]
        );
        assert_eq!(etcd_versions(&c), [EtcdVersion::V3_4]);
        let f = dockerfile(&base(), &c, &etcd_versions(&c), from.arch());
        assert!(f.contains("ENV ETCD_UNSUPPORTED_ARCH=arm64\n"), "{f}");
        let amd64 = dockerfile(&base(), &c, &etcd_versions(&c), None);
        assert!(!amd64.contains("ETCD_UNSUPPORTED_ARCH"), "{amd64}");
    }
}
