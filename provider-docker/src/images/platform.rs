//! Which builds of the image's parts a lab image takes: this host's own,
//! where the engine runs Linux containers of this host's architecture
//! (this project's machines), else the Linux builds `scripts/build-arch`
//! put in `linux-<arch>/` for the engine's architecture (an arm64 engine
//! on Apple silicon, where this host may not even be Linux). The platform
//! is the engine's unless `CPMLAB_PLATFORM` (`--platform`) asks for
//! another, which the engine then runs by emulation (`Target::emulated`).

use std::path::PathBuf;

use anyhow::Result;

use crate::engine::Engine;
use crate::errors::EnvNotReady;
use crate::go_parts;

/// Where the image's parts come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartsFrom {
    /// This host's builds (`Part::find`, the running cpmlab).
    Host,
    /// The Linux builds for `arch` in `dir` (`go_parts::arch_dir`).
    Arch { arch: String, dir: PathBuf },
}

impl PartsFrom {
    /// The engine's architecture where it is not this host's.
    pub fn arch(&self) -> Option<&str> {
        match self {
            Self::Host => None,
            Self::Arch { arch, .. } => Some(arch),
        }
    }

    /// The `linux-<arch>/` build of `name`, where it exists (None for the
    /// host's: those are found as `Part::find` finds them).
    pub fn arch_file(&self, name: &str) -> Option<PathBuf> {
        match self {
            Self::Host => None,
            Self::Arch { dir, .. } => Some(dir.join(name)).filter(|p| p.is_file()),
        }
    }
}

/// Decides from the platform `(os, arch)` the image is for (the engine's,
/// or the one `CPMLAB_PLATFORM` asks for) and this host's.
pub fn decide(
    engine: (&str, &str),
    host: (&str, &str),
    dir: Option<PathBuf>,
) -> Result<PartsFrom, EnvNotReady> {
    let (os, arch) = engine;
    if os != "linux" {
        return Err(EnvNotReady::new(
            format!("the engine runs {os} containers; the lab's are Linux"),
            "switch the engine to Linux containers",
        ));
    }
    if host == ("linux", arch) {
        return Ok(PartsFrom::Host);
    }
    let fix =
        format!("scripts/build-arch {arch} (on a linux/amd64 host), then cpmlab images build");
    let Some(dir) = dir else {
        return Err(EnvNotReady::new(
            format!(
                "the lab image is for linux/{arch}, this host is {}/{}, and there is no cache directory to find linux/{arch} parts in",
                host.0, host.1
            ),
            fix,
        ));
    };
    let (required, _) = go_parts::missing_in(&dir);
    if !required.is_empty() {
        return Err(EnvNotReady::new(
            format!(
                "the lab image is for linux/{arch} and this host is {}/{}: it needs linux/{arch} builds of its parts, and {} lacks {}",
                host.0,
                host.1,
                dir.display(),
                required.join(", ")
            ),
            fix,
        ));
    }
    Ok(PartsFrom::Arch {
        arch: arch.to_string(),
        dir,
    })
}

/// The platform a lab image is built for on this engine, and where its
/// parts come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The image's architecture (`arm64`).
    pub arch: String,
    /// The engine's own.
    pub engine_arch: String,
    pub from: PartsFrom,
}

impl Target {
    /// The engine runs the image by emulation: another architecture than
    /// its own (`CPMLAB_PLATFORM`).
    pub fn emulated(&self) -> bool {
        self.arch != self.engine_arch
    }

    /// `linux/arm64`.
    pub fn platform(&self) -> String {
        format!("linux/{}", self.arch)
    }

    /// The engine's own platform, `linux/amd64`.
    pub fn engine_platform(&self) -> String {
        format!("linux/{}", self.engine_arch)
    }
}

/// `decide` for this engine, the platform `CPMLAB_PLATFORM` asks for (the
/// engine's own where unset) and this host.
pub async fn target(engine: &Engine) -> Result<Target> {
    let wanted = cpmlab_model::platform::wanted()?;
    let (os, engine_arch) = engine.platform().await?;
    let arch = wanted.unwrap_or_else(|| engine_arch.clone());
    let from = decide(
        (&os, &arch),
        (std::env::consts::OS, go_parts::host_arch()),
        go_parts::arch_dir(&arch),
    )?;
    Ok(Target {
        arch,
        engine_arch,
        from,
    })
}

/// Where the parts of the image `target` builds come from.
pub async fn of(engine: &Engine) -> Result<PartsFrom> {
    Ok(target(engine).await?.from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_host_s_builds_where_the_engine_runs_its_platform() {
        assert_eq!(
            decide(("linux", "amd64"), ("linux", "amd64"), None).unwrap(),
            PartsFrom::Host
        );
        let e = decide(("windows", "amd64"), ("linux", "amd64"), None).unwrap_err();
        assert!(e.problem.contains("windows containers"), "{e}");
    }

    #[test]
    fn an_arm64_engine_takes_the_arm64_builds_once_the_required_ones_are_there() {
        let dir = tempfile::tempdir().unwrap();
        let e = decide(
            ("linux", "arm64"),
            ("macos", "aarch64"),
            Some(dir.path().to_path_buf()),
        )
        .unwrap_err();
        assert!(e.problem.contains("lacks cpmlab, envoy, etcd-3.4"), "{e}");
        assert!(e.fix.starts_with("scripts/build-arch arm64"), "{e}");
        for f in [
            "cpmlab",
            "envoy",
            "etcd-3.4",
            "kube-apiserver",
            "gardener-apiserver",
        ] {
            std::fs::write(dir.path().join(f), b"x").unwrap();
        }
        let from = decide(
            ("linux", "arm64"),
            ("macos", "aarch64"),
            Some(dir.path().to_path_buf()),
        )
        .unwrap();
        assert_eq!(from.arch(), Some("arm64"));
        assert_eq!(from.arch_file("envoy"), Some(dir.path().join("envoy")));
        assert_eq!(
            from.arch_file("cpmlab-apiserver"),
            None,
            "optional, not built"
        );
    }
}
