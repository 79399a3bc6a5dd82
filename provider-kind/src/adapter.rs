//! The privileged adapter: kind runs each node with `docker run
//! --privileged` (and execs in it with `docker exec --privileged`). Where
//! root lacks a capability Docker's `--privileged` grants (this project's
//! machines: CAP_SYS_RESOURCE), Docker refuses that with "unable to apply
//! caps: operation not permitted", and no kind cluster can start.
//!
//! What a kind node needs of `--privileged` can be given another way:
//! every capability the host can grant, no seccomp or AppArmor profile,
//! the system paths unmasked and writable (`systempaths=unconfined`),
//! every device allowed in the device cgroup, `/dev/kmsg` (the kubelet's
//! OOM watcher reads it), and the cgroup hierarchy writable (kind's
//! entrypoint makes the kubelet's cgroup root in it). The adapter is a
//! `docker` on the PATH of kind's own process only (`up` puts
//! `<lab dir>/adapter/docker` first there). Where a probe finds
//! `--privileged` refused (`cpmlab doctor --provider kind` says whether),
//! it rewrites `--privileged` in kind's `run` and `exec` calls to those
//! flags. Everywhere, it adds the lab's labels to kind's node `run`s
//! (`label_nodes`), so that every node container carries them as every
//! other object of the lab does, and `down` finds a crashed kind lab's
//! nodes and clusters by the engine alone. Every other call passes
//! through unchanged.
//!
//! The cgroup hierarchy: kind gives each node a private cgroup namespace
//! (`--cgroupns=private`), in which Docker mounts the node's own cgroup
//! subtree — read-only, where the container is not privileged. kind's
//! entrypoint makes the kubelet's cgroup root in it, so the adapter starts
//! the node with a few commands before the image's own entrypoint that
//! remount those cgroup mounts writable (the bind flag: the mount point
//! only, in the node's own mount namespace), then exec that entrypoint.
//! The host's hierarchy is never mounted into the node, and nothing
//! outside the node's own cgroup can be written.

use std::path::{Path, PathBuf};

/// Linux capabilities by number (`capability.h`), as Docker names them.
pub const CAPABILITIES: &[&str] = &[
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

/// What Docker prints when it cannot give a container every capability.
pub const REFUSED: &str = "unable to apply caps";

/// What the adapter gives a node in `--privileged`'s place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Capabilities the host cannot grant (dropped from ALL).
    pub missing_caps: Vec<String>,
    /// Host devices passed through (those of `DEVICES` that exist).
    pub devices: Vec<String>,
}

/// Devices a node uses that `--privileged` would have brought.
pub const DEVICES: &[&str] = &["/dev/kmsg"];

/// The capabilities missing from a bounding set (`CapBnd` of
/// /proc/self/status, hex), by name.
pub fn missing_caps(cap_bnd_hex: &str) -> Vec<String> {
    let Ok(bnd) = u64::from_str_radix(cap_bnd_hex.trim(), 16) else {
        return vec![];
    };
    CAPABILITIES
        .iter()
        .enumerate()
        .filter(|(i, _)| bnd & (1 << i) == 0)
        .map(|(_, c)| c.to_string())
        .collect()
}

impl Grant {
    /// What this host can grant: its root's bounding set, its devices.
    pub fn of_host() -> Grant {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let bnd = status
            .lines()
            .find_map(|l| l.strip_prefix("CapBnd:"))
            .unwrap_or("");
        Grant {
            missing_caps: missing_caps(bnd),
            devices: DEVICES
                .iter()
                .filter(|d| Path::new(d).exists())
                .map(|d| d.to_string())
                .collect(),
        }
    }

    /// The flags that stand for `--privileged` in a `docker run`.
    pub fn run_flags(&self) -> Vec<String> {
        let mut v: Vec<String> = ["--cap-add", "ALL"].map(String::from).to_vec();
        for c in &self.missing_caps {
            v.extend(["--cap-drop".to_string(), c.clone()]);
        }
        for o in [
            "seccomp=unconfined",
            "apparmor=unconfined",
            "systempaths=unconfined",
        ] {
            v.extend(["--security-opt".to_string(), o.to_string()]);
        }
        v.extend(["--device-cgroup-rule".to_string(), "a *:* rwm".to_string()]);
        for d in &self.devices {
            v.extend(["--device".to_string(), d.clone()]);
        }
        v
    }
}

/// What the node runs before the image's entrypoint:
/// - its cgroup mounts made writable (see the module's comment);
/// - containerd's CRI told to restrict pods' OOM score adjustments to its
///   own (`restrict_oom_score_adj`), as kind's entrypoint does for a
///   rootless node (`images/base/files/usr/local/bin/entrypoint`, kind
///   v0.33.0): without CAP_SYS_RESOURCE no process in the node may lower
///   an OOM score, and runc then refuses every pod sandbox ("failed to
///   update /proc/self/oom_score_adj: Permission denied"; kubelet asks
///   -998 for pause). The pods' scores are then never below the node's.
///   `CPMLAB_CONTAINERD_CONFIG` names another file (for tests).
pub const REMOUNT_CGROUPS: &str =
    "for m in $(awk '$3 == \"cgroup\" || $3 == \"cgroup2\" {print $2}' /proc/self/mounts); \
     do mount -o remount,bind,rw \"$m\" || exit 1; done; \
     c=${CPMLAB_CONTAINERD_CONFIG:-/etc/containerd/config.toml}; \
     if [ -f \"$c\" ]; then sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' \"$c\" || exit 1; fi; \
     exec \"$0\" \"$@\"";

/// kind's docker call `args` (without `docker`) as the adapter passes it
/// on: a node's `run`/`create` with `--privileged` (kind's node runs end
/// with the image, no command) gets the grant's flags instead and starts
/// with [`REMOUNT_CGROUPS`] before the image's entrypoint (`entrypoint`:
/// the image's ENTRYPOINT and CMD); `exec --privileged` runs with the
/// node's own capabilities; everything else is unchanged.
pub fn rewrite(
    args: &[String],
    grant: &Grant,
    entrypoint: impl Fn(&str) -> Option<Vec<String>>,
) -> Vec<String> {
    let Some(verb) = args.first() else {
        return args.to_vec();
    };
    let privileged = |a: &String| a == "--privileged" || a == "--privileged=true";
    match verb.as_str() {
        "run" | "create" if args.iter().any(privileged) => {
            let (image, opts) = args.split_last().expect("a verb and an image");
            let mut out = Vec::with_capacity(args.len() + 24);
            for a in opts {
                if privileged(a) {
                    out.extend(grant.run_flags());
                } else {
                    out.push(a.clone());
                }
            }
            match entrypoint(image) {
                Some(argv) if !argv.is_empty() => {
                    out.extend(["--entrypoint".to_string(), "/bin/sh".to_string()]);
                    out.push(image.clone());
                    out.extend(["-c".to_string(), REMOUNT_CGROUPS.to_string()]);
                    out.extend(argv);
                }
                // Unknown entrypoint: the node runs as it would, its cgroups
                // read-only (kind's entrypoint then names the failure).
                _ => out.push(image.clone()),
            }
            out
        }
        "exec" => args.iter().filter(|a| !privileged(a)).cloned().collect(),
        _ => args.to_vec(),
    }
}

/// An image's ENTRYPOINT followed by its CMD (`docker image inspect`).
pub fn image_entrypoint(docker: &Path, image: &str) -> Option<Vec<String>> {
    let out = std::process::Command::new(docker)
        .args([
            "image",
            "inspect",
            "-f",
            "{{json .Config.Entrypoint}}{{\"\\n\"}}{{json .Config.Cmd}}",
            image,
        ])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut argv = Vec::new();
    for line in text.lines() {
        let v: Option<Vec<String>> = serde_json::from_str(line).ok()?;
        argv.extend(v.unwrap_or_default());
    }
    Some(argv)
}

/// The adapter's directory in a lab (`<lab dir>/adapter`), holding the
/// `docker` kind runs.
pub fn dir(lab_root: &Path) -> PathBuf {
    lab_root.join("adapter")
}

/// The environment variable naming the real docker for the adapter.
pub const REAL_DOCKER_ENV: &str = "CPMLAB_REAL_DOCKER";

/// Writes `<dir>/docker`, which runs `cpmlab agent docker-adapter` (the
/// binary `exe`) with its arguments.
pub fn install(dir: &Path, exe: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    let shim = dir.join("docker");
    let quoted = exe.display().to_string().replace('\'', r"'\''");
    std::fs::write(
        &shim,
        format!(
            "#!/bin/sh\n# cpmlab's privileged adapter for kind's docker calls \
             (provider-kind/src/adapter.rs)\nexec '{quoted}' agent docker-adapter -- \"$@\"\n"
        ),
    )?;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755))?;
    Ok(shim)
}

/// The real docker: `CPMLAB_REAL_DOCKER`, else the first `docker` on PATH
/// that is not an adapter's.
pub fn real_docker() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(REAL_DOCKER_ENV) {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| d.file_name() != Some("adapter".as_ref()))
        .map(|d| d.join("docker"))
        .find(|p| p.is_file())
}

/// The lab whose nodes kind makes: each node container is labelled with
/// it (`label_nodes`), so that `down` finds a crashed kind lab's nodes by
/// the engine alone, its state directory gone.
pub const LAB_ENV: &str = "CPMLAB_KIND_LAB";

/// Set to `1` where Docker refuses `--privileged`: the adapter then gives
/// kind's privileged calls the grant instead (`rewrite`); else it passes
/// them on as they are.
pub const GRANT_ENV: &str = "CPMLAB_KIND_GRANT";

/// Role label of a kind node container.
pub const NODE_ROLE: &str = "kind-node";

/// kind's `docker run`/`create` of a node (it carries kind's own
/// `io.x-k8s.kind.cluster` label) with the lab's labels added; every other
/// call unchanged.
pub fn label_nodes(args: &[String], lab: &str) -> Vec<String> {
    let node = args.iter().any(|a| {
        a.starts_with("io.x-k8s.kind.cluster=") || a.starts_with("--label=io.x-k8s.kind.cluster=")
    });
    match args.first().map(String::as_str) {
        Some("run" | "create") if node => {
            let mut out = vec![args[0].clone()];
            out.extend([
                "--label".to_string(),
                format!("{}={lab}", crate::labels::LABEL_LAB),
                "--label".to_string(),
                format!("{}={NODE_ROLE}", crate::labels::LABEL_ROLE),
            ]);
            out.extend(args[1..].iter().cloned());
            out
        }
        _ => args.to_vec(),
    }
}

/// `cpmlab agent docker-adapter -- ARGS`: the real docker with the
/// rewritten arguments, in this process's place.
pub fn run(args: &[String]) -> anyhow::Result<u8> {
    use std::os::unix::process::CommandExt;
    let docker = real_docker().ok_or_else(|| {
        anyhow::anyhow!("the privileged adapter finds no docker on PATH (or {REAL_DOCKER_ENV})")
    })?;
    let mut args = args.to_vec();
    if let Some(lab) = std::env::var(LAB_ENV).ok().filter(|l| !l.is_empty()) {
        args = label_nodes(&args, &lab);
    }
    if std::env::var(GRANT_ENV).is_ok_and(|g| g == "1") {
        args = rewrite(&args, &Grant::of_host(), |image| {
            image_entrypoint(&docker, image)
        });
    }
    let err = std::process::Command::new(&docker).args(&args).exec();
    Err(anyhow::anyhow!("exec {}: {err}", docker.display()))
}

/// Whether this Docker engine refuses `--privileged` (Some(why)), probed
/// with a privileged container of `image` that only exits.
pub async fn privileged_refused(image: &str) -> anyhow::Result<Option<String>> {
    let out = tokio::process::Command::new("docker")
        .args([
            "run",
            "--rm",
            "--privileged",
            "--label",
            &format!("{}=privileged-probe", crate::labels::LABEL_IMAGE),
            "--entrypoint",
            "/bin/true",
            image,
        ])
        .kill_on_drop(true)
        .output()
        .await?;
    if out.status.success() {
        return Ok(None);
    }
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    anyhow::ensure!(
        err.contains(REFUSED) || err.contains("operation not permitted"),
        "probing `docker run --privileged {image}`: {err}"
    );
    Ok(Some(err.lines().last().unwrap_or(&err).to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    fn grant() -> Grant {
        Grant {
            missing_caps: vec!["SYS_RESOURCE".into()],
            devices: vec!["/dev/kmsg".into()],
        }
    }

    #[test]
    fn the_host_s_missing_capabilities_are_named() {
        // This project's machines: every capability but SYS_RESOURCE (24).
        assert_eq!(missing_caps("000001fffeffffff"), ["SYS_RESOURCE"]);
        assert!(missing_caps("000001ffffffffff").is_empty());
        assert_eq!(missing_caps("000001fffefffffe"), ["CHOWN", "SYS_RESOURCE"]);
        assert!(missing_caps("not hex").is_empty());
        assert_eq!(CAPABILITIES[24], "SYS_RESOURCE");
        assert_eq!(CAPABILITIES[40], "CHECKPOINT_RESTORE");
    }

    fn kind_entrypoint(image: &str) -> Option<Vec<String>> {
        (image == "kindest/node:v1.36.3").then(|| s(&["/usr/local/bin/entrypoint", "/sbin/init"]))
    }

    #[test]
    fn a_privileged_node_run_gets_the_grant_instead() {
        // The shape of kind's node `docker run` (provision.go).
        let args = s(&[
            "run",
            "--name",
            "lab-seed-a-control-plane",
            "--cgroupns=private",
            "--privileged",
            "--security-opt",
            "seccomp=unconfined",
            "--tmpfs",
            "/tmp",
            "kindest/node:v1.36.3",
        ]);
        let out = rewrite(&args, &grant(), kind_entrypoint);
        assert!(!out.iter().any(|a| a == "--privileged"), "{out:?}");
        let line = out.join(" ");
        assert!(
            line.contains("--cap-add ALL --cap-drop SYS_RESOURCE"),
            "{line}"
        );
        assert!(
            line.contains("--security-opt systempaths=unconfined"),
            "{line}"
        );
        assert!(line.contains("--device-cgroup-rule a *:* rwm"), "{line}");
        assert!(line.contains("--device /dev/kmsg"), "{line}");
        // kind's private cgroup namespace stays; the host's hierarchy is
        // not mounted.
        assert!(line.contains("--cgroupns=private"), "{line}");
        assert!(!line.contains("/sys/fs/cgroup:"), "{line}");
        // The node remounts its cgroups writable, then runs the image's
        // own entrypoint with its arguments.
        let at = out
            .iter()
            .position(|a| a == "kindest/node:v1.36.3")
            .unwrap();
        assert_eq!(out[at - 2..at], s(&["--entrypoint", "/bin/sh"]));
        assert_eq!(
            out[at + 1..],
            s(&[
                "-c",
                REMOUNT_CGROUPS,
                "/usr/local/bin/entrypoint",
                "/sbin/init"
            ])
        );
        assert!(line.contains("--name lab-seed-a-control-plane"));
        assert!(line.contains("--tmpfs /tmp"));
    }

    /// The remount script is run by a real shell: it remounts what
    /// /proc/self/mounts lists as cgroups and execs its arguments.
    #[test]
    fn the_remount_script_execs_the_entrypoint_with_its_arguments() {
        let d = tempfile::tempdir().unwrap();
        let config = d.path().join("config.toml");
        std::fs::write(
            &config,
            "[plugins.\"io.containerd.grpc.v1.cri\"]\n  restrict_oom_score_adj = false\n",
        )
        .unwrap();
        let out = std::process::Command::new("/bin/sh")
            .env("CPMLAB_CONTAINERD_CONFIG", &config)
            .args([
                "-c",
                &REMOUNT_CGROUPS.replace("mount -o", "echo mount -o"),
                "/bin/echo",
                "entrypoint",
                "/sbin/init",
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}");
        assert!(text.ends_with("entrypoint /sbin/init\n"), "{text}");
        // containerd restricts OOM score adjustments, as in a rootless node.
        assert_eq!(
            std::fs::read_to_string(&config).unwrap(),
            "[plugins.\"io.containerd.grpc.v1.cri\"]\n  restrict_oom_score_adj = true\n"
        );
    }

    #[test]
    fn kind_s_node_runs_carry_the_lab_s_labels_and_nothing_else_changes() {
        let node = s(&[
            "run",
            "--name",
            "lab-seed-a-control-plane",
            "--label",
            "io.x-k8s.kind.cluster=lab-seed-a",
            "--privileged",
            "kindest/node:v1.36.3",
        ]);
        let out = label_nodes(&node, "lab");
        assert_eq!(
            out[..5],
            s(&[
                "run",
                "--label",
                "cpmlab.lab=lab",
                "--label",
                "cpmlab.role=kind-node"
            ])
        );
        assert_eq!(out[5..], node[1..], "kind's own arguments, in order");
        for other in [
            s(&["run", "--rm", "busybox"]),
            s(&["exec", "--privileged", "node", "true"]),
            s(&["ps", "-a", "--filter", "label=io.x-k8s.kind.cluster"]),
            s(&[]),
        ] {
            assert_eq!(label_nodes(&other, "lab"), other);
        }
    }

    #[test]
    fn exec_drops_privileged_and_the_rest_passes_unchanged() {
        let exec = s(&["exec", "--privileged", "-i", "node", "kubectl", "apply"]);
        assert_eq!(
            rewrite(&exec, &grant(), kind_entrypoint),
            s(&["exec", "-i", "node", "kubectl", "apply"])
        );
        for other in [
            s(&["ps", "-a", "--filter", "label=io.x-k8s.kind.cluster"]),
            s(&["run", "--rm", "--cgroupns=private", "busybox"]),
            s(&["inspect", "--format", "{{.State}}", "x"]),
            s(&[]),
        ] {
            assert_eq!(rewrite(&other, &grant(), kind_entrypoint), other);
        }
    }

    #[test]
    fn the_shim_runs_the_adapter_with_its_arguments() {
        let d = tempfile::tempdir().unwrap();
        let shim = install(&dir(d.path()), Path::new("/opt/it's/cpmlab")).unwrap();
        let text = std::fs::read_to_string(&shim).unwrap();
        assert!(
            text.contains(r#"exec '/opt/it'\''s/cpmlab' agent docker-adapter -- "$@""#),
            "{text}"
        );
        assert_eq!(shim, d.path().join("adapter/docker"));
    }
}
