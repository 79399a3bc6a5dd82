//! A readyz a draining kube-apiserver answered with its etcd checks
//! stopped: the server's going-away answer, set aside like a refused
//! attempt, never counted as the API's failure.
//!
//! kube-apiserver's graceful shutdown (k8s.io/apiserver at v0.36,
//! `pkg/server/genericapiserver.go`): after the shutdown delay it stops
//! accepting requests, waits for those in flight to drain, and closes its
//! listener. Its etcd health and readiness checks are built to stop when
//! the in-flight requests have drained (`CreateHealthCheck` and
//! `CreateReadyCheck` get `DrainedNotify()`, `pkg/server/options/etcd.go`),
//! while `/readyz` stays exempt from the "apiserver is shutting down"
//! answer every other request gets then (503 with `Retry-After: 1`;
//! `isRequestExemptFromRetryAfter`, `pkg/server/filters/waitgroup.go`). A
//! readyz that reaches the server in those last milliseconds on a kept
//! connection is answered 500 with `[-]etcd failed` although etcd is fine:
//! the server says it is gone, as its 503s to the other lanes do at the
//! same moment.
//!
//! A readyz is set aside only on evidence from outside the probe:
//! - it got HTTP 500 and every check its answer names as failed is one of
//!   the etcd checks (`etcd`, `etcd-readiness`), and
//! - an API server of the seed it reached logged `Stopped listening` (its
//!   listener closing: the last step of that drain) within
//!   [`WINDOW_MS`] of the readyz's start (the server's log in the run
//!   directory's `logs/`, by Docker's timestamp).
//!
//! Any other readyz failure is judged as a failure.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::record::{Outcome, ProbeKind, Record};

/// How far from a server's `Stopped listening` a readyz may start and
/// still be its drain's answer: the in-flight requests drain and the
/// listener closes within milliseconds of each other when requests are
/// short, as the probes' are.
pub const WINDOW_MS: f64 = 1_000.0;

/// kube-apiserver's line when its listener closes
/// (k8s.io/apiserver `pkg/server/secure_serving.go`).
pub const STOPPED_LISTENING: &str = "Stopped listening on";

/// The checks `DrainedNotify` stops.
pub const ETCD_CHECKS: [&str; 2] = ["etcd", "etcd-readiness"];

/// An API server's listener closing, from its log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListenerClosed {
    /// The log's file stem: `<lab>-<seed>-apiserver-<n>`.
    pub server: String,
    pub at_unix_ms: f64,
}

impl ListenerClosed {
    /// Whether this server belongs to `seed` (its stem is
    /// `…<seed>-apiserver-<n>`).
    fn of_seed(&self, seed: &str) -> bool {
        self.server
            .rsplit_once("-apiserver")
            .is_some_and(|(prefix, _)| prefix == seed || prefix.ends_with(&format!("-{seed}")))
    }
}

/// One readyz set aside, with the evidence that matched it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DrainedReadyz {
    pub seq: u64,
    pub lane: String,
    pub start_unix_ms: f64,
    pub evidence: String,
}

/// The listeners that closed, from the API servers' logs in `text`
/// ((file stem, log text) pairs).
pub fn from_logs(logs: &[(String, String)]) -> Vec<ListenerClosed> {
    let mut out = Vec::new();
    for (stem, text) in logs {
        for line in text.lines().filter(|l| l.contains(STOPPED_LISTENING)) {
            let Some(at) = line
                .split_whitespace()
                .next()
                .and_then(crate::etcd_said::docker_time)
            else {
                continue;
            };
            out.push(ListenerClosed {
                server: stem.clone(),
                at_unix_ms: at,
            });
        }
    }
    out.sort_by(|a, b| a.at_unix_ms.total_cmp(&b.at_unix_ms));
    out
}

/// The API servers' logs of a run directory (`logs/**/*-apiserver-*.log`;
/// the kind form's pod logs name no seed, so only the docker form's
/// match one); none when the run kept no logs.
pub fn read(run: &Path) -> Vec<ListenerClosed> {
    from_logs(&crate::etcd_said::read_logs_named(run, "-apiserver-"))
}

/// Whether every check a failed readyz's answer names is an etcd check
/// (the probe keeps the `[-]<check> failed` lines, joined by `; `).
pub(crate) fn only_etcd_checks_failed(error: &str) -> bool {
    let failed: Vec<&str> = error
        .split("; ")
        .filter_map(|part| part.trim().strip_prefix("[-]"))
        .filter_map(|rest| rest.split_whitespace().next())
        .collect();
    !failed.is_empty() && failed.iter().all(|c| ETCD_CHECKS.contains(c))
}

/// The readyz records a draining server answered (see the module doc).
pub fn find(all: &[&Record], closed: &[ListenerClosed]) -> Vec<DrainedReadyz> {
    all.iter()
        .filter(|r| {
            r.probe == ProbeKind::Readyz
                && r.event.is_none()
                && r.outcome == Outcome::Http
                && r.http_status == Some(500)
                && r.error.as_deref().is_some_and(only_etcd_checks_failed)
        })
        .filter_map(|r| {
            let seed = r.seed.as_deref()?;
            let c = closed
                .iter()
                .filter(|c| c.of_seed(seed))
                .min_by(|a, b| {
                    (a.at_unix_ms - r.start_unix_ms)
                        .abs()
                        .total_cmp(&(b.at_unix_ms - r.start_unix_ms).abs())
                })?;
            let d = r.start_unix_ms - c.at_unix_ms;
            (d.abs() <= WINDOW_MS).then(|| DrainedReadyz {
                seq: r.seq,
                lane: crate::lane_key(r.probe, r.mode),
                start_unix_ms: r.start_unix_ms,
                evidence: format!(
                    "{} logged \"{STOPPED_LISTENING}\" {:.0} ms {} this readyz started (logs/{}.log)",
                    c.server,
                    d.abs(),
                    if d >= 0.0 { "before" } else { "after" },
                    c.server
                ),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::ConnMode;

    const STOP: &str = "2026-11-27T06:08:21.243113312Z I1127 06:08:21.238354       7 secure_serving.go:262] Stopped listening on [::]:443";

    fn closed() -> Vec<ListenerClosed> {
        from_logs(&[
            (
                "lab-seed-a-apiserver-0".into(),
                format!("2026-11-27T06:08:06.000000000Z I1127 x] Shutting down\n{STOP}\n"),
            ),
            (
                "lab-seed-b-apiserver-0".into(),
                "2026-11-27T06:08:06.000000000Z I1127 x] serving\n".into(),
            ),
        ])
    }

    fn readyz(seq: u64, at: f64, seed: &str, status: u16, error: &str) -> Record {
        let mut r = Record::new(
            seq,
            ProbeKind::Readyz,
            ConnMode::Reused,
            (at, 0.0),
            20.0,
            Outcome::Http,
        );
        r.http_status = Some(status);
        r.seed = Some(seed.into());
        r.error = Some(error.into());
        r
    }

    #[test]
    fn the_listener_closing_is_read_from_docker_s_timestamp() {
        let c = closed();
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].server, "lab-seed-a-apiserver-0");
        let t = crate::etcd_said::docker_time("2026-11-27T06:08:21.243113312Z").unwrap();
        assert!((c[0].at_unix_ms - t).abs() < 0.01);
        assert!(c[0].of_seed("seed-a") && !c[0].of_seed("seed-b") && !c[0].of_seed("eed-a"));
    }

    #[test]
    fn a_readyz_with_only_etcd_failing_as_its_seed_s_server_stops_listening_is_set_aside() {
        let c = closed();
        let at = c[0].at_unix_ms + 3.0;
        let etcd = "[-]etcd failed: reason withheld; [-]etcd-readiness failed: reason withheld";
        let rs = [
            readyz(1, at, "seed-a", 500, etcd),
            // Another seed's server did not stop.
            readyz(2, at, "seed-b", 500, etcd),
            // Too long after: etcd really failed.
            readyz(3, at + WINDOW_MS + 10.0, "seed-a", 500, etcd),
            // A check that drain does not stop failed too.
            readyz(
                4,
                at,
                "seed-a",
                500,
                "[-]etcd failed: reason withheld; [-]poststarthook/x failed: reason withheld",
            ),
            // Not the 500 readyz answers with.
            readyz(5, at, "seed-a", 503, etcd),
        ];
        let all: Vec<&Record> = rs.iter().collect();
        let got = find(&all, &c);
        assert_eq!(
            got.iter().map(|d| d.seq).collect::<Vec<_>>(),
            vec![1],
            "{got:?}"
        );
        assert!(
            got[0].evidence.contains("3 ms before"),
            "{}",
            got[0].evidence
        );
        assert_eq!(got[0].lane, "readyz/reused");
    }

    #[test]
    fn without_the_server_s_log_nothing_is_set_aside() {
        let r = readyz(1, 1.0, "seed-a", 500, "[-]etcd failed: reason withheld");
        assert!(find(&[&r], &[]).is_empty());
        assert!(!only_etcd_checks_failed("connection reset"));
        assert!(!only_etcd_checks_failed(""));
    }

    #[test]
    fn the_verdict_sets_it_aside_only_with_the_server_s_log() {
        let c = closed();
        let t = c[0].at_unix_ms;
        let ok = |seq: u64, at: f64| {
            let mut r = Record::new(
                seq,
                ProbeKind::Readyz,
                ConnMode::Reused,
                (at, 0.0),
                5.0,
                Outcome::Ok,
            );
            r.seed = Some("seed-a".into());
            r
        };
        let rs = vec![
            ok(1, t - 100.0),
            readyz(2, t + 3.0, "seed-a", 500, "[-]etcd failed: reason withheld"),
            ok(3, t + 100.0),
        ];
        let judge = |closed: &[ListenerClosed]| {
            crate::judge(
                &crate::Inputs {
                    records: &rs,
                    events: &[],
                    final_read: &crate::record::FinalRead::default(),
                    elections: &[],
                    plan: None,
                    listeners_closed: closed,
                    present: None,
                    cpu: &[],
                },
                &crate::criteria::Criteria::default(),
            )
        };
        let with = judge(&c);
        assert_eq!(with.overall.failed(), 0);
        assert_eq!(with.probes["readyz/reused"].drained_readyz, 1);
        assert_eq!(with.drained_readyz.len(), 1);
        let rule = with
            .rules
            .iter()
            .find(|r| r.name == crate::availability::RULE)
            .unwrap();
        assert!(
            rule.message
                .contains("1 readyz answered by a draining API server"),
            "{}",
            rule.message
        );
        let without = judge(&[]);
        assert_eq!(without.overall.failed(), 1);
        assert!(without.drained_readyz.is_empty());
    }
}
