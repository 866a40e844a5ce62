//! Files that hold conversations are their user's alone: the folders turnscope creates for
//! them are `0700` and the files `0600` (on Unix; elsewhere the system's defaults): the store
//! file, the console's kept handles, what the console writes into the temporary folder (a
//! copied request, one handed to an editor), `--events` recordings and exported sessions.
//! Only what turnscope creates is set so: a folder or file that exists keeps the permissions
//! it has. SQLite gives its `-wal` and `-shm` files the permissions of the store file they
//! belong to. Below every other module, so the recorder (`observe`) and the store use it alike.

use std::fs::OpenOptions;
use std::io;
use std::path::Path;

/// Creates `dir` and any missing parent, each new one readable by its owner only.
///
/// # Errors
/// As `std::fs::create_dir_all`.
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Options that create a file readable and writable by its owner only (read and write; the
/// caller says whether to create or truncate).
pub fn file_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.read(true).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

/// Creates the file at `path` for writing, or empties the one there (which keeps its
/// permissions); a new one is readable by its owner only.
///
/// # Errors
/// As `std::fs::File::create`.
pub fn create(path: &Path) -> io::Result<std::fs::File> {
    file_options().create(true).truncate(true).open(path)
}

/// Writes `bytes` to a new file at `path`, readable by its owner only; fails when something
/// is there already (in a shared folder such as the temporary one, another user may have put
/// a file or a link at a name it could guess).
///
/// # Errors
/// The file exists, or cannot be created or written.
pub fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = file_options().create_new(true).open(path)?;
    io::Write::write_all(&mut file, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn what_it_creates_only_its_owner_reads() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("turnscope-private-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dir = base.join("a/b");
        create_dir_all(&dir).unwrap();
        let file = dir.join("f");
        file_options()
            .create(true)
            .truncate(false)
            .open(&file)
            .unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&base), 0o700);
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&file), 0o600);
        // What exists keeps its permissions.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        file_options()
            .create(true)
            .truncate(false)
            .open(&file)
            .unwrap();
        assert_eq!(mode(&file), 0o640);
        // Created anew it is the owner's; emptied, it keeps what it had.
        let made = dir.join("h");
        io::Write::write_all(&mut create(&made).unwrap(), b"one").unwrap();
        assert_eq!(mode(&made), 0o600);
        std::fs::set_permissions(&made, std::fs::Permissions::from_mode(0o644)).unwrap();
        io::Write::write_all(&mut create(&made).unwrap(), b"2").unwrap();
        assert_eq!(std::fs::read(&made).unwrap(), b"2");
        assert_eq!(mode(&made), 0o644);
        let fresh = dir.join("g");
        write_new(&fresh, b"text").unwrap();
        assert_eq!(mode(&fresh), 0o600);
        assert_eq!(std::fs::read(&fresh).unwrap(), b"text");
        assert!(
            write_new(&fresh, b"again").is_err(),
            "never over what is there"
        );
        let _ = std::fs::remove_dir_all(&base);
    }
}
