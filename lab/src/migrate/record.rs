//! What a migration keeps in the lab's state file: the plan, the conditions,
//! the destination members and API servers it plans and creates, and the
//! source members that have left (their containers go in SourceSeedCleanup).
//! Written before and after every step, so a killed run resumes. The types
//! are part of the lab state (`crate::state`), which holds them.

pub use crate::state::{Driver, MigrationState};
