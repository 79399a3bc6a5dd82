//! The wall clock the lab's records and events share: milliseconds since
//! the Unix epoch.

/// Now, in ms since the Unix epoch (0 on a clock before it).
pub fn now_unix_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1e3)
        .unwrap_or(0.0)
}
