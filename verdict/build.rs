//! Whether the report's Chromium test can run here (`cpmlab-testenv`):
//! compiled as ignored where /usr/bin/chromium is missing, except with
//! CI=true, where it runs and fails.

fn main() {
    cpmlab_testenv::build_script(&[cpmlab_testenv::Need::Chromium]);
}
