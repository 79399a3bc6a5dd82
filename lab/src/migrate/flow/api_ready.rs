//! DestinationKubeAPIServerReady (destination): the destination's API servers started and ready through the destination gateway.

use super::*;

impl Flow<'_> {
    pub(super) async fn destination_api(&mut self, line: &Step) -> Result<(&'static str, String)> {
        if self.mig().force_shrink {
            line.detail("force-shrink: source members leave before the destination API starts");
            self.shrink(line, true).await?;
        }
        let mig = self.mig().clone();
        let etcd_servers: Vec<String> = self
            .state
            .members_of(&mig.to)
            .map(|m| format!("https://{}:2379", m.ip))
            .collect();
        for a in &mig.destination_apiservers {
            let exists = self.state.apiservers.iter().any(|x| x.name == a.name)
                && self.provider.workload_state(&a.container).await? != WorkloadState::Missing;
            if exists {
                if matches!(
                    self.provider.workload_state(&a.container).await?,
                    WorkloadState::Stopped | WorkloadState::Created
                ) {
                    self.provider.start(&self.state, &a.container).await?;
                }
                continue;
            }
            if !self.state.apiservers.iter().any(|x| x.name == a.name) {
                self.state.apiservers.push(a.clone());
                self.save()?;
            }
            self.provider
                .start_apiserver(&self.state, &self.ca, a, &etcd_servers, &self.sa)
                .await?;
            self.note(line, &format!("{} started", a.name));
        }
        // The gateway exposes the API and follows the replicas: each is an
        // endpoint once its readiness probe passed (the kubelet's, with its
        // initial delay), as a Deployment's pods join their Service.
        self.provider.sync_gateway(&self.state, &mig.to).await?;
        for a in &mig.destination_apiservers {
            line.detail(&format!("waiting for {} to be ready", a.name));
            crate::apiserver::ready::wait_replica_ready(
                &self.state,
                a,
                &self.tls.ca_pem,
                &self.cancel,
            )
            .await?;
        }
        let gw = self.state.seed(&mig.to).expect("seed").gateway.ip;
        crate::apiserver::ready::wait_api_at(&self.state, gw, &self.tls.ca_pem, &self.cancel)
            .await?;
        // Ready as a Deployment is: every replica's endpoint served, so
        // the clients the DNS switch sends here are spread over all.
        line.detail("waiting for the gateway to serve every replica");
        self.provider
            .wait_gateway_serves(&self.state, &mig.to, &self.cancel)
            .await?;
        Ok((
            "Ready",
            format!(
                "{} API server replica(s) ready through the `{}` gateway ({gw}), on {} destination member(s)",
                mig.destination_apiservers.len(),
                mig.to,
                etcd_servers.len()
            ),
        ))
    }
}
