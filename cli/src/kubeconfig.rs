//! `cpmlab kubeconfig`: write a kubeconfig for the shoot API (or the
//! garden's, `--garden`), print its path.

use std::path::Path;

use anyhow::{Context, Result};

use crate::{check_name, LabArgs};

pub async fn run(state_root: &Path, lab: &LabArgs, garden: bool) -> Result<u8> {
    check_name(&lab.name)?;
    let (dir, state) = cpmlab_lab::status::load_lab(state_root, &lab.name)?;
    let path = if garden {
        let k = cpmlab_garden::access::kubeconfig(
            &dir,
            &state,
            &cpmlab_garden::access::Identity::Operator,
        )?;
        let root = std::fs::canonicalize(&dir.root).unwrap_or_else(|_| dir.root.clone());
        let path = root.join("garden.kubeconfig");
        // It holds the operator's key: owner-only.
        cpmlab_model::state::write_private(&path, k)
            .with_context(|| format!("write {}", path.display()))?;
        path
    } else {
        cpmlab_core::kubeconfig::write(&dir, &state).await?
    };
    println!("{}", path.display());
    Ok(0)
}
