//! `cpmlab compare`: one scenario under several variants (a plan or a knob),
//! each repeated, every run kept, and the differences stated with their
//! uncertainty.

pub mod stats;
pub mod variants;
