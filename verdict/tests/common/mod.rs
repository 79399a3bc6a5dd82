//! What the corpus's tests share: where the corpus is, and copying a run
//! directory of it to edit.

use std::path::{Path, PathBuf};

/// `verdict/tests/corpus/<name>`.
pub fn corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(name)
}

/// Copies the files under `from` (the members' logs in `logs/` too).
pub fn copy_tree(from: &Path, to: &Path) {
    for f in std::fs::read_dir(from).unwrap() {
        let f = f.unwrap();
        let dest = to.join(f.file_name());
        if f.file_type().unwrap().is_dir() {
            std::fs::create_dir(&dest).unwrap();
            copy_tree(&f.path(), &dest);
        } else {
            std::fs::copy(f.path(), dest).unwrap();
        }
    }
}
