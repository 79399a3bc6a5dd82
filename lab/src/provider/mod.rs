//! Providers materialise a lab's topology. `docker` builds the fast
//! Docker-only form (one Docker network per seed); the kind provider
//! (kind clusters with Istio) comes with its own issue.

pub mod docker;
