//! Modes under a restrictive umask: directories 0750 and files 0640 whatever the umask, since
//! `fsutil` only changes a mode it finds different (a test of its own: the umask is per process).

use std::os::unix::fs::MetadataExt;

use msprobe_core::fsutil::{create_dirs, create_new, open_append, DIR_MODE, FILE_MODE};

#[test]
fn modes_are_exact_under_a_restrictive_umask() {
    // SAFETY: umask only sets the process's file mode creation mask; this binary has no other test.
    let old = unsafe { libc::umask(0o077) };
    let t = tempfile::tempdir().unwrap();
    let d = create_dirs(&t.path().join("dump"), &["step0", "rank"]).unwrap();
    let f = d.join("a.json");
    drop(create_new(&f).unwrap());
    let g = d.join("b.log");
    drop(open_append(&g).unwrap());
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    for p in [t.path().join("dump"), t.path().join("dump/step0"), d.clone()] {
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o7777, DIR_MODE, "{}", p.display());
    }
    for p in [f, g] {
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o7777, FILE_MODE, "{}", p.display());
    }
}
