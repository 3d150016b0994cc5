//! Making new names durable: a file's `fsync` makes its bytes durable, not
//! the directory entry that names it, so whoever creates a file or a
//! directory syncs the directory that holds it. Plain std; used by the store,
//! the output sink and the WARC writer.

use std::fs::File;
use std::io;
use std::path::Path;

/// Syncs the directory `dir`, so that the names created, renamed or removed
/// in it survive a power cut.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Syncs the directory that holds `path` (the current directory for a bare
/// name), so that `path`'s name survives a power cut.
pub fn sync_parent(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => sync_dir(dir),
        _ => sync_dir(Path::new(".")),
    }
}

/// Creates `dir` and its missing ancestors, like [`std::fs::create_dir_all`],
/// and syncs the parent of each directory it creates, so that the whole path
/// survives a power cut. Nothing is synced when `dir` exists already.
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    // The missing ancestors, innermost first.
    let missing: Vec<&Path> = dir
        .ancestors()
        .filter(|a| !a.as_os_str().is_empty())
        .take_while(|a| !a.is_dir())
        .collect();
    std::fs::create_dir_all(dir)?;
    for created in missing.iter().rev() {
        sync_parent(created)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_every_missing_level_and_leaves_an_existing_one_alone() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let deep = tmp.path().join("a/b/c");
        create_dir_all(&deep).expect("create");
        assert!(deep.is_dir());
        create_dir_all(&deep).expect("again");
        let file = tmp.path().join("a/f");
        std::fs::write(&file, b"x").expect("file");
        let err = create_dir_all(&file.join("sub")).expect_err("under a file");
        assert_eq!(err.kind(), io::ErrorKind::NotADirectory);
    }

    #[test]
    fn a_bare_name_syncs_the_current_directory() {
        sync_parent(Path::new("Cargo.toml")).expect("sync .");
    }
}
