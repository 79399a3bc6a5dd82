//! What an operator does for a Live CPM, in the garden (`cpmlab migrate`):
//! the trigger (gardener `docs/operations/live_control_plane_migration.md`:
//! the `migration.gardener.cloud/live-migrate` annotation, then
//! `spec.seedName` changed through `shoots/binding`, which
//! gardener-apiserver's admission may refuse), then following the Shoot's
//! `status.liveMigration.conditions` as the two gardenlets write them;
//! resume (the lab's pause lifted, a failed step handed back to its owner)
//! and abort (the GEP's annotation, then `spec.seedName` back).

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::errors::{BadInput, Cancel};
use crate::garden::client::{
    annotations_of, seeds_of, Garden, ANNOTATION_FORCE_SHRINK, ANNOTATION_LIVE_MIGRATE,
};
use crate::garden::trigger::{self, Settings};
use crate::garden::GardenError;
use crate::migrate::conditions::{owner, Conditions, Status, STEPS};
use crate::migrate::gardenlet::ANNOTATION_ABORT;
use crate::progress::Progress;

/// gardener-apiserver's admission refused the trigger: nothing started.
#[derive(Debug, thiserror::Error)]
#[error("gardener-apiserver refused the migration {from} -> {to}: {message}")]
pub struct Refused {
    pub from: String,
    pub to: String,
    pub message: String,
}

/// Where following a migration ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Followed {
    Completed,
    /// The step the lab's pause was set after is True.
    StoppedAfter(String),
    /// A step is False: its condition's message.
    Failed {
        step: String,
        message: String,
    },
}

/// A migration the garden has under way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InProgress {
    pub from: String,
    pub to: String,
    /// Triggered for an external driver (`cpmlab.lab/driver: external`):
    /// the lab's gardenlets stand aside from it.
    pub external: bool,
}

impl InProgress {
    /// Why the lab's gardenlets' resume or abort refuses an external
    /// driver's migration, and what to run instead.
    pub fn refuse_for_lab_gardenlets(&self, abort: bool) -> Option<String> {
        self.external.then(|| {
            format!(
                "the migration {} -> {} in progress was triggered for an external driver (`{}: external`): the lab's gardenlets stand aside from it, so `--{}` has nothing to hand it to; run the driver again with `cpmlab migrate --driver external --resume --command '<its command>'`{}",
                self.from,
                self.to,
                trigger::DRIVER,
                if abort { "abort" } else { "resume" },
                if abort { " (it aborts its own migration)" } else { "" }
            )
        })
    }
}

/// The shoot in the garden.
#[derive(Clone)]
pub struct Shoot {
    pub garden: Garden,
    pub namespace: String,
    pub name: String,
}

impl Shoot {
    /// The migration under way, if one is: its seeds and who drives it.
    pub async fn migration(&self) -> Result<Option<InProgress>, GardenError> {
        let s = self.garden.shoot(&self.namespace, &self.name).await?;
        let a = annotations_of(&s);
        let (spec, status) = seeds_of(&s);
        Ok(
            match (
                a.get(ANNOTATION_LIVE_MIGRATE).map(String::as_str),
                spec,
                status,
            ) {
                (Some("true"), Some(spec), Some(status)) if spec != status => Some(InProgress {
                    from: status,
                    to: spec,
                    external: a.get(trigger::DRIVER).is_some_and(|d| d == "external"),
                }),
                _ => None,
            },
        )
    }

    /// The seed the shoot's control plane runs in.
    pub async fn running_in(&self) -> Result<Option<String>, GardenError> {
        Ok(seeds_of(&self.garden.shoot(&self.namespace, &self.name).await?).1)
    }

    /// The trigger: the settings' annotations (the intent among them), then
    /// the binding to `to`. A refusal takes the annotations back and is
    /// [`Refused`] with gardener-apiserver's words.
    pub async fn trigger(&self, from: &str, to: &str, settings: &Settings) -> Result<()> {
        let g = &self.garden;
        // The conditions of a former migration go: the gardenlets start
        // from none.
        g.clear_conditions(&self.namespace, &self.name).await?;
        g.annotate_shoot(&self.namespace, &self.name, &settings.annotations())
            .await?;
        match g.bind(&self.namespace, &self.name, to).await {
            Ok(()) => Ok(()),
            Err(e) => {
                let undo: Vec<(&str, Option<String>)> = settings
                    .annotations()
                    .into_iter()
                    .map(|(k, _)| (k, None))
                    .collect();
                if let Err(u) = g.annotate_shoot(&self.namespace, &self.name, &undo).await {
                    tracing::warn!("taking the annotations back: {u}");
                }
                match e.admission_message() {
                    Some(m) => Err(Refused {
                        from: from.to_string(),
                        to: to.to_string(),
                        message: m.to_string(),
                    }
                    .into()),
                    None => Err(e.into()),
                }
            }
        }
    }

    /// Lifts the lab's pause and hands a failed step back to its owner
    /// (its condition Unknown, so that its gardenlet tries it again): what
    /// was done, in words.
    /// With `force_shrink`, the GEP's escape hatch is asked for as well
    /// (`migration.gardener.cloud/force-shrink-etcd`), which the
    /// gardenlets take up mid-migration.
    pub async fn resume(&self, force_shrink: bool) -> Result<String> {
        let g = &self.garden;
        let c = g.conditions(&self.namespace, &self.name).await?;
        let mut said = vec![];
        if force_shrink {
            g.annotate_shoot(
                &self.namespace,
                &self.name,
                &[(ANNOTATION_FORCE_SHRINK, Some("true".into()))],
            )
            .await?;
            said.push("force-shrink asked for".to_string());
        }
        if let Some(f) = c.failed() {
            g.set_condition(
                &self.namespace,
                &self.name,
                &f.kind,
                Status::Unknown,
                "Retrying",
                "resumed by the operator",
            )
            .await?;
            said.push(format!("{} handed back to its gardenlet", f.kind));
        }
        g.annotate_shoot(&self.namespace, &self.name, &[(trigger::STOP_AFTER, None)])
            .await?;
        said.push("the pause lifted".into());
        Ok(said.join("; "))
    }

    /// The GEP's abort, allowed only while DestinationEtcdPeersJoined is
    /// False: the annotation, the destination's gardenlet removes its
    /// members and clears the migration, then `spec.seedName` goes back.
    pub async fn abort(&self, from: &str, budget: Duration, cancel: &Cancel) -> Result<()> {
        let g = &self.garden;
        let c = g.conditions(&self.namespace, &self.name).await?;
        let join = c.get(crate::migrate::flow::JOIN).expect("a step");
        if join.status != Status::False {
            return Err(BadInput(format!(
                "--abort is allowed only while {} is False (the GEP's rule); it is {} ({})",
                join.kind,
                join.status.as_str(),
                join.reason
            ))
            .into());
        }
        g.annotate_shoot(
            &self.namespace,
            &self.name,
            &[(ANNOTATION_ABORT, Some("true".into()))],
        )
        .await?;
        let t0 = Instant::now();
        loop {
            cancel.check()?;
            let s = g.shoot(&self.namespace, &self.name).await?;
            if !annotations_of(&s).contains_key(ANNOTATION_LIVE_MIGRATE) {
                break;
            }
            anyhow::ensure!(
                t0.elapsed() < budget,
                "the destination's gardenlet did not abort within {budget:?}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        g.bind(&self.namespace, &self.name, from).await?;
        Ok(())
    }

    /// Follows the conditions until the migration completes, a step fails,
    /// or the step the pause is set after is True; each transition said on
    /// `progress`. Gives up when no condition moved for `stall` (a
    /// gardenlet gone for good).
    pub async fn follow(
        &self,
        progress: &Progress,
        stop_after: Option<&str>,
        stall: Duration,
        cancel: &Cancel,
    ) -> Result<Followed> {
        let mut last: Option<Conditions> = None;
        let mut moved = Instant::now();
        let mut quiet_garden = false;
        let mut lines: std::collections::HashMap<String, crate::progress::Step> =
            Default::default();
        loop {
            cancel.check()?;
            let c = match self.garden.conditions(&self.namespace, &self.name).await {
                Ok(c) => {
                    if quiet_garden {
                        progress.note("    - the garden answers again");
                        quiet_garden = false;
                    }
                    c
                }
                Err(e) => {
                    if !quiet_garden {
                        progress.note(&format!("    - the garden does not answer ({e}); the gardenlets go on without it, waiting"));
                        quiet_garden = true;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            if last.as_ref() != Some(&c) {
                moved = Instant::now();
                for cond in &c.0 {
                    let before = last
                        .as_ref()
                        .and_then(|l| l.get(&cond.kind))
                        .map(|x| (x.status, x.message.clone()));
                    if before == Some((cond.status, cond.message.clone())) {
                        continue;
                    }
                    let who = owner(&cond.kind).map(|o| o.as_str()).unwrap_or("-");
                    match cond.status {
                        Status::Progressing => {
                            let line = lines
                                .entry(cond.kind.clone())
                                .or_insert_with(|| progress.step(format!("{} ({who})", cond.kind)));
                            if !cond.message.is_empty() {
                                line.detail(&cond.message);
                            }
                        }
                        Status::True => {
                            let line = lines
                                .remove(&cond.kind)
                                .unwrap_or_else(|| progress.step(format!("{} ({who})", cond.kind)));
                            line.done_with(&cond.message);
                        }
                        Status::False => {
                            let line = lines
                                .remove(&cond.kind)
                                .unwrap_or_else(|| progress.step(format!("{} ({who})", cond.kind)));
                            line.fail(&cond.message);
                        }
                        Status::Unknown => {}
                    }
                }
                last = Some(c.clone());
            }
            if let Some(f) = c.failed() {
                return Ok(Followed::Failed {
                    step: f.kind.clone(),
                    message: f.message.clone(),
                });
            }
            if c.next_step().is_none() {
                return Ok(Followed::Completed);
            }
            if let Some(s) = stop_after {
                if c.get(s).is_some_and(|x| x.status == Status::True) {
                    return Ok(Followed::StoppedAfter(s.to_string()));
                }
            }
            if moved.elapsed() > stall {
                anyhow::bail!(
                    "no condition of the migration moved for {:.0} s (next: {}); are the seeds' gardenlets running? (`cpmlab status`)",
                    stall.as_secs_f64(),
                    c.next_step().unwrap_or("-")
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// The steps' names, for messages.
pub fn steps() -> String {
    STEPS.join(", ")
}

#[cfg(test)]
mod tests {
    use super::InProgress;

    #[test]
    fn the_lab_gardenlets_refuse_an_external_drivers_migration_and_say_what_to_run() {
        let m = |external| InProgress {
            from: "seed-a".into(),
            to: "seed-b".into(),
            external,
        };
        assert_eq!(m(false).refuse_for_lab_gardenlets(false), None);
        assert_eq!(m(false).refuse_for_lab_gardenlets(true), None);
        let r = m(true).refuse_for_lab_gardenlets(false).unwrap();
        assert!(
            r.contains("seed-a -> seed-b") && r.contains("`--resume`"),
            "{r}"
        );
        assert!(r.contains("--driver external --resume --command"), "{r}");
        assert!(!r.contains("aborts its own"), "{r}");
        let a = m(true).refuse_for_lab_gardenlets(true).unwrap();
        assert!(
            a.contains("`--abort`") && a.ends_with("(it aborts its own migration)"),
            "{a}"
        );
    }
}
