//! Which of the suite's tests can run here: each test that needs something
//! of the host (Docker, the built Go parts, Envoy, the kind tools, etcd and
//! kubectl) carries `#[cfg_attr(not(cpmlab_has_<need>), ignore = "...")]`,
//! and this sets the cfg of every need found — of every need where CI=true
//! (`cpmlab-testenv`; a kernel with sch_netem only where it is found,
//! CI or not). Where a need is missing the tests that need it are
//! compiled as ignored, so nextest and `cargo test` report them skipped
//! with the reason, never passed, and the build warns naming the fix; with
//! CI=true they run and fail.

use cpmlab_testenv::{build_script, Need};

fn main() {
    build_script(&[
        Need::Docker,
        Need::KubeApiserver,
        Need::GenericApiserver,
        Need::Envoy,
        Need::KindTools,
        Need::EtcdKubectl,
        Need::Druid,
        Need::Netem,
        Need::Root,
        Need::Arm64,
    ]);
}
