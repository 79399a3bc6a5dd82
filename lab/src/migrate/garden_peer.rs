//! The garden as one gardenlet sees it, beside the conditions both
//! write: its client, the shoot, the pace of its looks, and what the two
//! gardenlets hand each other through the Shoot's annotations (the
//! gateway handover in EtcdMigrationComplete).

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::errors::Cancel;
use crate::garden::client::{annotations_of, Garden};
use crate::garden::trigger;
use crate::progress::Step;

/// The garden as one gardenlet sees it: its client, the shoot, the pace.
#[derive(Clone)]
pub struct Peer {
    pub garden: Garden,
    pub namespace: String,
    pub name: String,
    pub interval: Duration,
    pub budget: Duration,
}

impl Peer {
    /// The destination's side of the gateway handover in
    /// EtcdMigrationComplete: asks the source's gardenlet for it (an
    /// annotation on the Shoot) and waits, reading the Shoot every
    /// interval, until the source says its gateway's hold is over; what the
    /// source said.
    pub async fn ask_source_handover(&self, line: &Step, cancel: &Cancel) -> Result<String> {
        let t0 = Instant::now();
        let mut asked = false;
        loop {
            cancel.check()?;
            match self.garden.shoot(&self.namespace, &self.name).await {
                Ok(shoot) => {
                    let a = annotations_of(&shoot);
                    match a.get(trigger::GATEWAY_HANDOVER_STATE).map(String::as_str) {
                        Some(v) if v.starts_with("held") => {
                            return Ok(v
                                .trim_start_matches("held")
                                .trim_start_matches(": ")
                                .to_string())
                        }
                        Some("requested") => asked = true,
                        _ if !asked => {
                            self.garden
                                .annotate_shoot(
                                    &self.namespace,
                                    &self.name,
                                    &[(trigger::GATEWAY_HANDOVER_STATE, Some("requested".into()))],
                                )
                                .await?;
                            asked = true;
                            line.detail("asked the source's gardenlet for its gateway's handover");
                        }
                        _ => {}
                    }
                }
                Err(e) => line.detail(&format!("the garden: {e}")),
            }
            anyhow::ensure!(
                t0.elapsed() < self.budget,
                "the source's gardenlet did not hand its gateway over within {:?}",
                self.budget
            );
            line.detail("waiting for the source's gateway handover");
            sleep(self.interval, cancel).await?;
        }
    }
}

/// Sleeps `d`, stopping at Ctrl-C.
pub async fn sleep(d: Duration, cancel: &Cancel) -> Result<()> {
    let until = Instant::now() + d;
    while Instant::now() < until {
        cancel.check()?;
        tokio::time::sleep((until - Instant::now()).min(Duration::from_millis(250))).await;
    }
    Ok(())
}
