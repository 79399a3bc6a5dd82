//! The gateway handover, in EtcdMigrationComplete right after the DNS-cache wait (the GEP's orders): what the source seed's gateway does for the clients that kept their connections to it (`drain-gateway`: its Gateway for the shoot deleted, Envoy drains; `drain-gateway-in-place`: the Gateway changed so that Envoy drains with the routes intact, then deleted; `max-connection-age`: the gateway's connections age out; `forward`: its routes for the API go to the destination's gateway until the cleanup), and the hold that keeps the source API serving until they have gone, before any source member leaves.

use super::*;
use crate::migrate::gateway_handover::{HCM_DRAIN_TIMEOUT, ISTIO_DRAIN};
use cpmlab_core::gateway_admin::{self, DrainCounters};

/// How long the source's gateway has to report a change's drain: istiod's
/// longest debounce (10 s, `PILOT_DEBOUNCE_MAX`, istio
/// `pilot/pkg/features/tuning.go`), its push and the new chain's warming,
/// with room for a busy machine.
const DRAIN_ACK_TIMEOUT: Duration = Duration::from_secs(60);

impl Flow<'_> {
    /// The migration's gateway handover from EtcdMigrationComplete: done
    /// here where one process runs every step; where the destination's
    /// gardenlet runs the step, asked of the source's, which acts on its
    /// own seed's gateway and says when its hold is over (the Shoot's
    /// `cpmlab.lab/gateway-handover-state`).
    pub(super) async fn gateway_handover(&mut self, line: &Step) -> Result<Option<String>> {
        let mig = self.mig().clone();
        let age = self
            .state
            .topology
            .api
            .gateway_max_connection_duration()
            .map_err(|(f, m)| BadInput(format!("{f}: {m}")))?;
        if mig
            .gateway_handover
            .source_hold(self.state.topology.api.exposure, age)
            .is_none()
        {
            return Ok(None);
        }
        match (&self.role_seed, &self.peer) {
            (Some(me), Some(peer)) if *me == mig.to => {
                peer.ask_source_handover(line, &self.cancel).await.map(Some)
            }
            _ => self.source_gateway_handover(line).await,
        }
    }

    /// Runs the migration's gateway handover on the source's gateway; what
    /// it did, or None for `none`. A resumed run holds from the first
    /// release's time.
    pub async fn source_gateway_handover(&mut self, line: &Step) -> Result<Option<String>> {
        let mig = self.mig().clone();
        let h = mig.gateway_handover;
        let age = self
            .state
            .topology
            .api
            .gateway_max_connection_duration()
            .map_err(|(f, m)| BadInput(format!("{f}: {m}")))?;
        let exposure = self.state.topology.api.exposure;
        if h.source_hold(exposure, age).is_none() {
            return Ok(None);
        }
        let from = mig.from.clone();
        // The drain Istio's gateway runs (drain-gateway-in-place, below):
        // as long as its Envoy was started with, read when the drain began.
        let mut drain = ISTIO_DRAIN;
        let since = if h.forwards() {
            // The destination seed's ingress name, as Gardener has one per
            // seed: what the source's ServiceEntry resolves. Again on a
            // resume (the same record).
            let to = crate::exposure::forward_destination(&mig.to, &self.state.dns.zone);
            let gw = self.state.seed(&mig.to).expect("seed").gateway.ip;
            self.provider
                .set_dns(&self.state, &[(to.host.as_str(), &[gw][..])])
                .await?;
            let at = self.mark_once(
                line,
                |m| &mut m.source_gateway_forwarded_unix_ms,
                &format!(
                    "the `{from}` seed's routes for the shoot API sent to the `{}` seed's gateway across the WAN (forward: {} -> {gw}, {})",
                    mig.to,
                    to.host,
                    match exposure {
                        crate::topology::ApiExposure::Termination => "TLS originated with the API's name; client certificates do not go with it",
                        crate::topology::ApiExposure::Passthrough => "the clients' TLS passed on; the API's filter chain changed, so it drains",
                    }
                ),
            )?;
            self.provider.sync_gateway(&self.state, &from).await?;
            at
        } else if h.drains_in_place() {
            let host = crate::migrate::gateway_handover::drain_host(
                &crate::exposure::api_route(&self.state.topology).host,
            );
            // What the gateway's listener manager had counted before the
            // change, so that the drain it reports is this change's (none
            // on a resume: the run before made the change).
            let before = if mig.source_gateway_drained_unix_ms.is_none() {
                Some(self.gateway_drain_counters(&from).await?)
            } else {
                None
            };
            let changed = self.mark_once(
                line,
                |m| &mut m.source_gateway_drained_unix_ms,
                &format!("the `{from}` seed's Gateway for the shoot changed in place (drain-gateway-in-place): its server also names {host}, so its gateway drains the shoot API's connections with their routes as they were; the apiserver-proxy EnvoyFilter deleted"),
            )?;
            // Again on a resume (a merge patch, idempotent), unless the
            // deletion that follows the drain was done already.
            if mig.source_gateway_released_unix_ms.is_none() {
                self.provider.sync_gateway(&self.state, &from).await?;
            }
            // The hold runs from when the gateway says the drain began,
            // not from the change: a control plane's push (istiod
            // debounces 100 ms to 10 s) and the new chain's warming come
            // first.
            let (acked, d) = self
                .gateway_drain_acked(line, &from, changed, before.as_ref())
                .await?;
            drain = d;
            acked
        } else if h.deletes_source_gateway() {
            let at = self.mark_once(
                line,
                |m| &mut m.source_gateway_released_unix_ms,
                &format!("the `{from}` seed's Gateway for the shoot deleted (drain-gateway): its gateway drains the shoot API's connections"),
            )?;
            // Again on a resume: the deletion is idempotent.
            self.provider.sync_gateway(&self.state, &from).await?;
            at
        } else {
            now_unix_ms()
        };
        let hold = h
            .source_hold_draining(exposure, age, drain)
            .expect("a variant that holds");
        let left_ms = (since + hold.as_secs_f64() * 1e3 - now_unix_ms()).max(0.0);
        let deadline = Instant::now() + Duration::from_millis(left_ms.ceil() as u64);
        let what = match h {
            GatewayHandover::DrainGatewayInPlace => format!(
                "the `{from}` gateway drains the shoot API's connections in place, their routes intact (its Envoy's {:.0} s drain and {} s), then its Gateway goes",
                drain.as_secs_f64(),
                HCM_DRAIN_TIMEOUT.as_secs()
            ),
            GatewayHandover::DrainGateway => format!(
                "the `{from}` gateway drains the shoot API's connections (Istio's {} s drain and {} s)",
                ISTIO_DRAIN.as_secs(),
                HCM_DRAIN_TIMEOUT.as_secs()
            ),
            GatewayHandover::Forward => match exposure {
                crate::topology::ApiExposure::Passthrough => format!(
                    "the `{from}` gateway drains the shoot API's connections, whose chain now forwards (Istio's {} s drain and {} s)",
                    ISTIO_DRAIN.as_secs(),
                    HCM_DRAIN_TIMEOUT.as_secs()
                ),
                crate::topology::ApiExposure::Termination => format!(
                    "the `{from}` gateway takes the forwarding routes ({} s)",
                    HCM_DRAIN_TIMEOUT.as_secs()
                ),
            },
            _ => format!(
                "connections kept to the `{from}` gateway age out ({} and the {} s drain timeout)",
                self.state
                    .topology
                    .api
                    .gateway_max_connection_duration
                    .as_deref()
                    .unwrap_or("-"),
                HCM_DRAIN_TIMEOUT.as_secs()
            ),
        };
        self.wait_until(line, deadline, |left| {
            format!("{what}: the source API serves {left:.0} s more")
        })
        .await?;
        if h.drains_in_place() {
            self.mark_once(
                line,
                |m| &mut m.source_gateway_released_unix_ms,
                &format!("the `{from}` seed's Gateway for the shoot deleted after its drain (drain-gateway-in-place)"),
            )?;
            self.provider.sync_gateway(&self.state, &from).await?;
        }
        Ok(Some(format!(
            "gateway handover {}: {what}; the source API served {:.0} s more before any source member left",
            h.as_str(),
            hold.as_secs_f64()
        )))
    }

    /// The source gateway's listener-manager counters (envoy
    /// `listener_manager_impl.cc`), read through its admin.
    async fn gateway_drain_counters(&self, seed: &str) -> Result<DrainCounters> {
        let text = self
            .gateway_admin(seed, "stats?filter=listener_manager")
            .await
            .with_context(|| {
                format!("read the `{seed}` gateway's listener manager (its Envoy's admin)")
            })?;
        Ok(DrainCounters::parse(&text))
    }

    /// A GET of Envoy's admin `path` in `seed`'s gateway.
    async fn gateway_admin(&self, seed: &str, path: &str) -> Result<String> {
        let gw = &self.state.seed(seed).expect("seed").gateway.container;
        crate::provider::gateway_admin(self.provider, &self.state, gw, path).await
    }

    /// Waits until the `seed` gateway's Envoy says the change made at
    /// `changed` (unix ms) drains: its listener manager counted the update
    /// and the drain runs. Returns when (kept in the migration's state,
    /// so a resume holds from the first time) and the drain time its Envoy
    /// runs with (`server_info`'s `--drain-time-s`, which pilot-agent sets
    /// from the mesh config's `drainDuration`).
    async fn gateway_drain_acked(
        &mut self,
        line: &Step,
        seed: &str,
        changed: f64,
        before: Option<&DrainCounters>,
    ) -> Result<(f64, Duration)> {
        if let (Some(at), Some(ms)) = (
            self.mig().source_gateway_drain_acked_unix_ms,
            self.mig().source_gateway_drain_time_ms,
        ) {
            return Ok((at, Duration::from_millis(ms as u64)));
        }
        let deadline = Instant::now() + DRAIN_ACK_TIMEOUT;
        let kind = loop {
            self.cancel.check()?;
            let last = self.gateway_drain_counters(seed).await;
            if let Ok(Some(kind)) = last.as_ref().map(|c| c.drain_started(before)) {
                break kind;
            }
            if Instant::now() >= deadline {
                anyhow::bail!(
                    "the `{seed}` seed's gateway did not report the change's drain within {} s of it (its Envoy's listener manager: {}); the hold needs the drain's start",
                    DRAIN_ACK_TIMEOUT.as_secs(),
                    match &last {
                        Ok(c) => format!("{c:?}"),
                        Err(e) => format!("unread: {e:#}"),
                    }
                );
            }
            line.detail(&format!(
                "waiting for the `{seed}` gateway to report the drain ({:.1} s since the change)",
                (now_unix_ms() - changed) / 1e3
            ));
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let at = now_unix_ms();
        let info = self
            .gateway_admin(seed, "server_info")
            .await
            .with_context(|| {
                format!("read the `{seed}` gateway's server_info (its Envoy's admin)")
            })?;
        let drain = gateway_admin::drain_time(&info).with_context(|| {
            format!("the `{seed}` gateway's server_info names no drain time (command_line_options.drain_time)")
        })?;
        let m = self.mig_mut();
        m.source_gateway_drain_acked_unix_ms = Some(at);
        m.source_gateway_drain_time_ms = Some(drain.as_secs_f64() * 1e3);
        self.save()?;
        self.note(
            line,
            &format!(
                "the `{seed}` gateway reported {} draining {:.1} s after the change (its Envoy's listener manager); it drains for {:.0} s (the drain time its server_info gives)",
                kind.as_str(),
                (at - changed) / 1e3,
                drain.as_secs_f64()
            ),
        );
        Ok((at, drain))
    }

    /// The time a handover step happened, kept in the migration's state
    /// (`field`): set now, saved and noted the first time; read back on a
    /// resume, so the hold runs from the first time across it.
    fn mark_once(
        &mut self,
        line: &Step,
        field: fn(&mut MigrationState) -> &mut Option<f64>,
        note: &str,
    ) -> Result<f64> {
        if let Some(at) = *field(self.mig_mut()) {
            return Ok(at);
        }
        let at = now_unix_ms();
        *field(self.mig_mut()) = Some(at);
        self.save()?;
        self.note(line, note);
        Ok(at)
    }
}
