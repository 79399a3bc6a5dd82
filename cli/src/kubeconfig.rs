//! `cpmlab kubeconfig`: write a kubeconfig for the shoot API, print its path.

use std::path::Path;

use anyhow::Result;

use crate::{check_name, LabArgs};

pub async fn run(state_root: &Path, lab: &LabArgs) -> Result<u8> {
    check_name(&lab.name)?;
    let (dir, state) = cpmlab_lab::status::load_lab(state_root, &lab.name)?;
    let path = cpmlab_core::kubeconfig::write(&dir, &state).await?;
    println!("{}", path.display());
    Ok(0)
}
