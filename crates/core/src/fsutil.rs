//! File-system safety: 0750 directories, 0640 files, no symlinks under the dump path, atomic
//! replacement of the JSON files, and which write errors mean the file system takes no more.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub const DIR_MODE: u32 = 0o750;
pub const FILE_MODE: u32 = 0o640;

/// Whether a write error means the dump's file system takes no more data: full (`ENOSPC`), over
/// quota (`EDQUOT`), read-only (`EROFS`) or failing (`EIO`). The writer then stops capture; other
/// errors (a name too long, a permission) concern one file.
pub fn is_storage_failure(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT | libc::EROFS | libc::EIO))
}

/// Whether a write error means the file system has no room left (`ENOSPC`, `EDQUOT`).
pub fn is_out_of_space(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

/// Sets `path`'s mode when it is not `mode` already (a umask or a default ACL may have changed
/// it at creation). The stat is a read; the chmod it spares is an inode write (a journal
/// transaction on ext4) for each of the five things created per step.
fn ensure_mode(path: &Path, mode: u32) -> io::Result<()> {
    if fs::symlink_metadata(path)?.permissions().mode() & 0o7777 != mode {
        fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// [`ensure_mode`] for an open file.
fn ensure_file_mode(f: &File, mode: u32) -> io::Result<()> {
    if f.metadata()?.permissions().mode() & 0o7777 != mode {
        f.set_permissions(fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

fn refuse_symlink(p: &Path) -> io::Result<bool> {
    match fs::symlink_metadata(p) {
        Ok(m) if m.file_type().is_symlink() => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is a symbolic link; msprobe refuses to write through links (use the real path)", p.display()),
        )),
        Ok(m) if !m.is_dir() => {
            Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("{} exists and is not a directory", p.display())))
        }
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Creates `root` (and missing parents) and then each of `subdirs` below it, mode 0750.
/// The root and everything below it must not be symlinks.
pub fn create_dirs(root: &Path, subdirs: &[&str]) -> io::Result<PathBuf> {
    if !refuse_symlink(root)? {
        std::fs::DirBuilder::new().recursive(true).mode(DIR_MODE).create(root)?;
        ensure_mode(root, DIR_MODE)?;
        refuse_symlink(root)?;
    }
    let mut p = root.to_path_buf();
    for d in subdirs {
        p.push(d);
        if !refuse_symlink(&p)? {
            match std::fs::DirBuilder::new().mode(DIR_MODE).create(&p) {
                Ok(()) => ensure_mode(&p, DIR_MODE)?,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    refuse_symlink(&p)?;
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(p)
}

/// Creates a new file (never replacing one), mode 0640, not following links.
pub fn create_new(path: &Path) -> io::Result<File> {
    let f =
        OpenOptions::new().write(true).create_new(true).mode(FILE_MODE).custom_flags(libc::O_NOFOLLOW).open(path)?;
    ensure_file_mode(&f, FILE_MODE)?;
    Ok(f)
}

/// [`create_new`], also open for reading (a file to be mapped shared, read and written).
pub fn create_new_rw(path: &Path) -> io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    ensure_file_mode(&f, FILE_MODE)?;
    Ok(f)
}

/// Opens an existing file for writing in place (not truncated, not created), not following links.
pub fn open_existing(path: &Path) -> io::Result<File> {
    OpenOptions::new().write(true).custom_flags(libc::O_NOFOLLOW).open(path)
}

/// Opens a file for appending (created 0640 if missing), not following links.
pub fn open_append(path: &Path) -> io::Result<File> {
    let f = OpenOptions::new().append(true).create(true).mode(FILE_MODE).custom_flags(libc::O_NOFOLLOW).open(path)?;
    ensure_file_mode(&f, FILE_MODE)?;
    Ok(f)
}

/// Reads a whole file, refusing a symbolic link (O_NOFOLLOW) and anything but a regular file.
pub fn read_nofollow(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut f = OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a regular file", path.display())));
    }
    let mut out = Vec::new();
    f.read_to_end(&mut out)?;
    Ok(out)
}

/// Opens a regular file for reading, refusing a symbolic link.
pub fn open_read_nofollow(path: &Path) -> io::Result<File> {
    let f = OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a regular file", path.display())));
    }
    Ok(f)
}

/// Whether `p` is a directory itself (not a link to one).
pub fn is_real_dir(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_dir())
}

/// A file written under a temporary name next to `path` and renamed onto it when complete, so
/// readers never see a half-written file (`msprobe recover`, and JSON files that could not be
/// kept open while their step runs).
pub struct Replacement {
    path: PathBuf,
    tmp: PathBuf,
    file: File,
}

/// Names starting with this and a dot-name are the temporaries of [`Replacement`].
pub const TMP_MARK: &str = ".tmp";

impl Replacement {
    pub fn create(path: &Path) -> io::Result<Replacement> {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
        let tmp = path.with_file_name(format!(".{name}{TMP_MARK}{}", std::process::id()));
        let file = match create_new(&tmp) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                // Left by a process of the same pid that was killed mid-write.
                fs::remove_file(&tmp)?;
                create_new(&tmp)?
            }
            Err(e) => return Err(e),
        };
        Ok(Replacement { path: path.to_path_buf(), tmp, file })
    }

    /// Writes `bytes` and renames the file onto its path.
    pub fn commit(mut self, bytes: &[u8]) -> io::Result<()> {
        let res = self.file.write_all(bytes);
        drop(self.file);
        match res {
            Ok(()) => fs::rename(&self.tmp, &self.path),
            Err(e) => {
                let _ = fs::remove_file(&self.tmp);
                Err(e)
            }
        }
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename, so readers never see a
/// half-written JSON file.
pub fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    Replacement::create(path)?.commit(bytes)
}

/// A small tmpfs for tests of a full disk (mounting needs root).
#[cfg(test)]
pub(crate) mod small_fs {
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};

    /// A tmpfs mounted on a temporary directory, unmounted when dropped.
    pub struct SmallFs {
        dir: tempfile::TempDir,
    }

    impl SmallFs {
        /// Mounts a tmpfs of `size` (`mount -o size=`); None (the test skips, saying why) when
        /// not root. As root, a mount that fails fails the test.
        pub fn mount(size: &str) -> Option<SmallFs> {
            use std::os::unix::fs::MetadataExt;
            if std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(1) != 0 {
                eprintln!("skipped: mounting a small tmpfs needs root");
                return None;
            }
            let dir = tempfile::tempdir().unwrap();
            let opts = format!("size={size}");
            let st = Command::new("mount").args(["-t", "tmpfs", "-o", &opts, "tmpfs"]).arg(dir.path()).status();
            assert!(st.is_ok_and(|s| s.success()), "mount -t tmpfs failed as root");
            Some(SmallFs { dir })
        }

        pub fn path(&self) -> &Path {
            self.dir.path()
        }

        /// Fills the file system with one file, grown until the disk is full; returns its path.
        pub fn fill(&self) -> PathBuf {
            use std::io::Write;
            let p = self.path().join("filler");
            let mut f = std::fs::File::create(&p).unwrap();
            let chunk = vec![0u8; 4096];
            while f.write_all(&chunk).is_ok() {}
            p
        }
    }

    impl Drop for SmallFs {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(self.path()).stderr(Stdio::null()).status();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn modes_and_symlink_refusal() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("dump");
        let d = create_dirs(&root, &["step0", "rank"]).unwrap();
        assert_eq!(fs::metadata(&d).unwrap().mode() & 0o777, DIR_MODE);
        let f = d.join("x.json");
        replace_file(&f, b"{}").unwrap();
        assert_eq!(fs::metadata(&f).unwrap().mode() & 0o777, FILE_MODE);
        assert!(create_new(&f).is_err(), "never overwrite silently");
        replace_file(&f, b"{1}").unwrap();
        assert_eq!(fs::read(&f).unwrap(), b"{1}");

        let link = t.path().join("link");
        std::os::unix::fs::symlink(&root, &link).unwrap();
        let e = create_dirs(&link, &["step0"]).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let inner = root.join("step1");
        std::os::unix::fs::symlink(t.path(), &inner).unwrap();
        assert!(create_dirs(&root, &["step1", "rank"]).is_err());
    }
}
