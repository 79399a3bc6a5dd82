//! Envoy's admin API in a seed's gateway, as both forms reach it: the
//! docker form's Envoy on its admin port (wget in the gateway's
//! container), the kind form's through Istio's pilot-agent (`pilot-agent
//! request GET`, what `istioctl proxy-config` uses). What the lab reads
//! there: the Envoy version and drain time in force (`server_info`), and
//! the listener manager's counters that say a filter chain has started to
//! drain (`stats`).

use std::time::Duration;

/// The argv that GETs the admin `path` (`server_info`, `stats?usedonly`)
/// in a seed's gateway, bounded by 2 s: the docker form's from Envoy's
/// admin port with busybox's wget (which crashes with -T here, so
/// `timeout` bounds it); the kind form's Istio ingress pod through
/// `pilot-agent request`, Istio's own client of the proxy's admin API.
pub fn argv(docker: bool, path: &str) -> Vec<String> {
    if docker {
        let url = format!(
            "http://127.0.0.1:{}/{path}",
            crate::exposure::envoy::ADMIN_PORT
        );
        ["timeout", "2", "wget", "-q", "-O", "-", &url]
            .map(String::from)
            .to_vec()
    } else {
        ["timeout", "2", "pilot-agent", "request", "GET", path]
            .map(String::from)
            .to_vec()
    }
}

/// Envoy's version from its admin's `server_info` JSON: the second field of
/// `version` (`<commit>/<version>/<status>/<build>/<ssl>`).
pub fn envoy_version(server_info: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(server_info).ok()?;
    let full = v["version"].as_str()?;
    full.split('/')
        .nth(1)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The drain time Envoy runs with (`--drain-time-s`, which pilot-agent
/// sets from the mesh config's `drainDuration`), from `server_info`'s
/// `command_line_options.drain_time` (a protobuf Duration in JSON: `45s`).
pub fn drain_time(server_info: &str) -> Option<Duration> {
    let v: serde_json::Value = serde_json::from_str(server_info).ok()?;
    let s = v["command_line_options"]["drain_time"].as_str()?;
    let secs: f64 = s.strip_suffix('s')?.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

/// The listener manager's counters that show a listener change taking
/// effect (envoy `listener_manager_impl.cc`): an update of a listener's
/// filter chains in place counts `listener_in_place_updated` and, once the
/// new chains are warm, drains the old ones
/// (`total_filter_chains_draining`, for the drain time); any other update
/// counts `listener_modified` and drains the whole listener
/// (`total_listeners_draining`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DrainCounters {
    pub in_place_updated: u64,
    pub filter_chains_draining: u64,
    pub listener_modified: u64,
    pub listeners_draining: u64,
}

/// How a listener change drains what it replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainKind {
    /// Only the changed filter chains drain; the listener's other chains
    /// and their connections are untouched.
    InPlace,
    /// The whole listener drains: every connection it holds.
    WholeListener,
}

impl DrainKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DrainKind::InPlace => "its filter chain in place",
            DrainKind::WholeListener => "the whole listener (not in place)",
        }
    }
}

impl DrainCounters {
    /// From Envoy's `/stats` text (`name: value` per line).
    pub fn parse(stats: &str) -> Self {
        let get = |name: &str| {
            stats
                .lines()
                .filter_map(|l| l.split_once(": "))
                .find(|(k, _)| k.trim() == name)
                .and_then(|(_, v)| v.trim().parse().ok())
                .unwrap_or(0)
        };
        DrainCounters {
            in_place_updated: get("listener_manager.listener_in_place_updated"),
            filter_chains_draining: get("listener_manager.total_filter_chains_draining"),
            listener_modified: get("listener_manager.listener_modified"),
            listeners_draining: get("listener_manager.total_listeners_draining"),
        }
    }

    /// Whether the change made after `before` was read has started to
    /// drain: the update counted and its drain running. Without a
    /// `before` (a resumed step, whose change was made by the run before),
    /// a drain running is taken as the change's.
    pub fn drain_started(&self, before: Option<&DrainCounters>) -> Option<DrainKind> {
        match before {
            Some(b) => {
                if self.in_place_updated > b.in_place_updated && self.filter_chains_draining > 0 {
                    Some(DrainKind::InPlace)
                } else if self.listener_modified > b.listener_modified
                    && self.listeners_draining > 0
                {
                    Some(DrainKind::WholeListener)
                } else {
                    None
                }
            }
            None if self.filter_chains_draining > 0 => Some(DrainKind::InPlace),
            None if self.listeners_draining > 0 => Some(DrainKind::WholeListener),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = r#"{"version": "3909deb175ef358202d6ab4f94d683ffc0fdb477/1.37.0/Clean/RELEASE/BoringSSL",
        "state": "LIVE", "command_line_options": {"drain_time": "45s", "drain_strategy": "Immediate"}}"#;

    #[test]
    fn the_version_and_drain_time_are_read_from_server_info() {
        assert_eq!(envoy_version(INFO).as_deref(), Some("1.37.0"));
        assert_eq!(drain_time(INFO), Some(Duration::from_secs(45)));
        assert_eq!(
            drain_time(r#"{"command_line_options": {"drain_time": "2.500s"}}"#),
            Some(Duration::from_millis(2500))
        );
        for bad in [
            r#"{"state": "LIVE"}"#,
            "not json",
            r#"{"command_line_options": {"drain_time": "-1s"}}"#,
        ] {
            assert_eq!(drain_time(bad), None, "{bad}");
        }
        assert_eq!(envoy_version(r#"{"state": "LIVE"}"#), None);
        assert_eq!(envoy_version("not json"), None);
    }

    #[test]
    fn each_form_reaches_the_admin_with_its_own_client() {
        let docker = argv(true, "server_info");
        assert!(docker.contains(&"wget".to_string()), "{docker:?}");
        assert!(
            docker.last().unwrap().ends_with(":15000/server_info"),
            "{docker:?}"
        );
        let kind = argv(false, "server_info");
        assert_eq!(kind[2..], ["pilot-agent", "request", "GET", "server_info"]);
    }

    #[test]
    fn a_drain_starts_only_when_the_update_is_counted_and_its_drain_runs() {
        let before = DrainCounters::parse(
            "listener_manager.listener_in_place_updated: 2\nlistener_manager.total_filter_chains_draining: 1\nlistener_manager.listener_modified: 0\n",
        );
        assert_eq!(before.in_place_updated, 2);
        // An earlier drain still running is not this change's.
        assert_eq!(before.drain_started(Some(&before)), None);
        // Counted, but the new chain still warming: not yet.
        let warming = DrainCounters {
            in_place_updated: 3,
            filter_chains_draining: 0,
            ..before
        };
        assert_eq!(warming.drain_started(Some(&before)), None);
        let draining = DrainCounters {
            filter_chains_draining: 1,
            ..warming
        };
        assert_eq!(
            draining.drain_started(Some(&before)),
            Some(DrainKind::InPlace)
        );
        let whole = DrainCounters {
            listener_modified: 1,
            listeners_draining: 1,
            ..before
        };
        assert_eq!(
            whole.drain_started(Some(&before)),
            Some(DrainKind::WholeListener)
        );
        // A resumed step: a drain running is the change's.
        assert_eq!(draining.drain_started(None), Some(DrainKind::InPlace));
        assert_eq!(DrainCounters::default().drain_started(None), None);
    }
}
