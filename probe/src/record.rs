//! What the probe agent writes (`records.ndjson`, `events.ndjson`,
//! `final.json`): the types live in the verdict crate, which reads them;
//! re-exported here, where the agent writes them.

pub use cpmlab_verdict::record::*;
