//! The provider interface (crate `cpmlab-provider`) with the factory above
//! both forms: the provider a lab was made by (its state says which).

use anyhow::Result;

use crate::state::LabState;
pub use cpmlab_provider::*;

/// The provider of labs made by `kind` (a lab's state says which made it).
/// Both stand on the Docker engine: the kind form's clusters are Docker
/// containers, and its router, DNS server and probe agent are the docker
/// form's own.
pub async fn connect_for(kind: crate::state::ProviderKind) -> Result<Box<dyn Provider>> {
    let docker = cpmlab_provider_docker::DockerProvider::connect().await?;
    Ok(match kind {
        crate::state::ProviderKind::Docker => Box::new(docker),
        crate::state::ProviderKind::Kind => {
            Box::new(cpmlab_provider_kind::provider::KindProvider::new(docker))
        }
    })
}

/// The provider that does what the lab's commands ask of `state`'s lab.
pub async fn for_lab(state: &LabState) -> Result<Box<dyn Provider>> {
    connect_for(state.provider).await
}

/// The docker provider, for what is not one lab's (the scenario runner
/// makes docker labs; the lab list).
pub async fn connect() -> Result<Box<dyn Provider>> {
    connect_for(crate::state::ProviderKind::Docker).await
}
