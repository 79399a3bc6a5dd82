//! cpmlab's model: the lab as data. The declared lab (`topology`), link
//! profiles (`link::profile`), the migration's plans and conditions
//! (`migrate::{membership, conditions}`), addressing, ports and the objects' labels, the lab's
//! names and addresses planned from them (`plan`), and the lab state kept
//! on disk (`state`). Serde types, validation and file reading; no
//! Docker, network or async runtime. The `cpmlab` crate re-exports each
//! module under the same path.

pub mod addressing;
pub mod errors;
pub mod kind;
pub mod labels;
pub mod placement;
pub mod plan;
pub mod platform;
pub mod ports;
pub mod state;
pub mod topology;
pub mod yaml_file;

pub mod link {
    //! The link's data: profiles, directions, the shaping backend's choice.
    pub mod profile;
}

pub mod migrate {
    //! The migration's data: its plans and the next-removal decision
    //! (`membership`), the order of the steps around the DNS switch
    //! (`order`), what the source gateway does for kept connections
    //! (`gateway_handover`), and the GEP's conditions (`conditions`).
    pub mod conditions;
    pub mod gateway_handover;
    pub mod membership;
    pub mod order;
}
