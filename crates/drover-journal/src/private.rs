//! A daemon's state is its user's alone: job scripts and environments hold users' secrets.
//! New directories are made 0700 and files 0600 (whatever the umask); a restart finds files
//! left looser (by an older version, a restore, a hand) and tightens them, saying which.

use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Makes `dir` (and missing parents, 0700 too) if needed.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Options that create a file 0600.
pub fn file_options() -> std::fs::OpenOptions {
    let mut o = std::fs::OpenOptions::new();
    o.mode(0o600);
    o
}

/// Takes group and other bits off `path` and, for a directory, everything below it
/// (sockets, which are for other users to reach, and symbolic links are left as they are).
/// Returns one line per change (`PATH: mode 0644 -> 0600`).
pub fn tighten(path: &Path) -> io::Result<Vec<String>> {
    let mut changed = Vec::new();
    tighten_into(path, &mut changed)?;
    Ok(changed)
}

/// [`tighten`] as log lines: what of `what` (a configuration key, say) was loose and is
/// private now, or why it could not be made so.
pub fn tighten_report(path: &Path, what: &str) -> Vec<String> {
    match tighten(path) {
        Ok(fixed) => {
            fixed.into_iter().map(|f| format!("{what} was readable by other users; made private: {f}")).collect()
        }
        Err(e) => vec![format!("error: cannot make {what} private ({}): {e}", path.display())],
    }
}

fn tighten_into(path: &Path, changed: &mut Vec<String>) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let ft = meta.file_type();
    if !(ft.is_dir() || ft.is_file()) {
        return Ok(());
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        let new = mode & 0o7700;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(new))?;
        changed.push(format!("{}: mode {mode:04o} -> {new:04o}", path.display()));
    }
    if ft.is_dir() {
        for e in std::fs::read_dir(path)? {
            tighten_into(&e?.path(), changed)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looser_modes_are_tightened_and_named_sockets_are_left() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("state");
        create_dir(&d.join("journal")).unwrap();
        assert_eq!(std::fs::metadata(&d).unwrap().permissions().mode() & 0o777, 0o700);
        let f = d.join("journal/journal.0");
        std::fs::write(&f, b"x").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        let _l = std::os::unix::net::UnixListener::bind(d.join("sock")).unwrap();
        std::fs::set_permissions(d.join("sock"), std::fs::Permissions::from_mode(0o666)).unwrap();
        let mut got = tighten(&d).unwrap();
        got.sort();
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got.iter().any(|l| l.ends_with("journal.0: mode 0644 -> 0600")), "{got:?}");
        assert!(got.iter().any(|l| l.ends_with("state: mode 0755 -> 0700")), "{got:?}");
        assert_eq!(std::fs::metadata(d.join("sock")).unwrap().permissions().mode() & 0o777, 0o666);
        assert!(tighten(&d).unwrap().is_empty(), "a second pass finds nothing");
        assert!(tighten(&t.path().join("missing")).unwrap().is_empty());
    }

    #[test]
    fn new_files_are_private_whatever_the_umask() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("f");
        file_options().create(true).write(true).open(&p).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
    }
}
