//! CPU time of each container, from its cgroup (v1 or v2, cgroupfs or
//! systemd driver), so that a run can tell a starved container from a slow
//! link. Reading a file costs microseconds; `docker stats` costs a second.

use std::path::Path;

/// CPU time a container has used, in nanoseconds, from its cgroup.
pub fn container_ns(id: &str) -> Option<u64> {
    container_ns_under(Path::new("/sys/fs/cgroup"), id)
}

fn container_ns_under(root: &Path, id: &str) -> Option<u64> {
    // cgroup v1: cpuacct.usage in nanoseconds.
    for dir in [
        format!("cpuacct/docker/{id}"),
        format!("cpu,cpuacct/docker/{id}"),
        format!("cpuacct/system.slice/docker-{id}.scope"),
        format!("cpu,cpuacct/system.slice/docker-{id}.scope"),
    ] {
        if let Ok(t) = std::fs::read_to_string(root.join(dir).join("cpuacct.usage")) {
            return t.trim().parse().ok();
        }
    }
    // cgroup v2: cpu.stat's usage_usec.
    for dir in [
        format!("system.slice/docker-{id}.scope"),
        format!("docker/{id}"),
    ] {
        if let Ok(t) = std::fs::read_to_string(root.join(dir).join("cpu.stat")) {
            return t
                .lines()
                .find_map(|l| l.strip_prefix("usage_usec "))
                .and_then(|u| u.trim().parse::<u64>().ok())
                .map(|u| u * 1000);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_cgroup_versions_are_read() {
        let d = tempfile::tempdir().unwrap();
        let v1 = d.path().join("cpuacct/docker/abc");
        std::fs::create_dir_all(&v1).unwrap();
        std::fs::write(v1.join("cpuacct.usage"), "123456789\n").unwrap();
        assert_eq!(container_ns_under(d.path(), "abc"), Some(123_456_789));
        let v2 = d.path().join("system.slice/docker-def.scope");
        std::fs::create_dir_all(&v2).unwrap();
        std::fs::write(v2.join("cpu.stat"), "usage_usec 42\nuser_usec 40\n").unwrap();
        assert_eq!(container_ns_under(d.path(), "def"), Some(42_000));
        assert_eq!(container_ns_under(d.path(), "nope"), None);
    }
}
