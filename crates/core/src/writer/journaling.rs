//! The writer's side of the crash journal: the journal of each dump path (the recorder's, which
//! capturing threads append their records to, or, for a writer used alone, one of its own), what
//! the writer appends itself (directory entries; records and construct.json values sent without
//! their entries), and which of its bytes are still needed: the entries of a directory are given
//! back once it is closed, i.e. its JSON files hold them.

use crate::header::Header;
use crate::journal::{self, Appended, FileSink, Identity, Sink, Space};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The dump path of a `{root}/step{N}/rank{R}` directory.
fn root_of(dir: &Path) -> &Path {
    dir.parent().and_then(Path::parent).unwrap_or(Path::new("."))
}

struct RootJournal {
    sink: Arc<dyn Sink>,
    space: Space,
    /// A directory's JSON files could not be written: the journal is kept at exit.
    keep: bool,
}

/// The journal of each dump path.
#[derive(Default)]
pub(super) struct Journals {
    by_root: HashMap<PathBuf, RootJournal>,
}

impl Journals {
    /// The recorder's journal of `root` (the first one given is kept).
    pub(super) fn set(&mut self, root: PathBuf, sink: Arc<dyn Sink>) {
        sink.prepare();
        let space = Space::new(sink.base());
        self.by_root.entry(root).or_insert(RootJournal { sink, space, keep: false });
    }

    /// Makes sure `dir`'s dump path has a journal: a writer used alone (no recorder gave it one)
    /// creates a plain-file journal.
    pub(super) fn ensure(&mut self, dir: &Path, header: &Header) -> std::io::Result<()> {
        let root = root_of(dir);
        if !self.by_root.contains_key(root) {
            let sink = FileSink::open(root, &Identity::of_this_process(root, header))?;
            self.set(root.to_path_buf(), sink);
        }
        Ok(())
    }

    /// Appends entries of `dir` (made by the writer itself).
    pub(super) fn append(&mut self, dir: &Path, bytes: &[u8]) -> std::io::Result<()> {
        let Some(j) = self.by_root.get_mut(root_of(dir)) else { return Ok(()) };
        let a = j.sink.append(bytes);
        j.space.processed(a, Some(dir));
        if a.ok {
            Ok(())
        } else {
            Err(j.sink.failure().unwrap_or_else(|| {
                std::io::Error::other(format!("the journal {} is full or cannot be written", j.sink.path().display()))
            }))
        }
    }

    /// Entries of `dir` a capturing thread appended.
    pub(super) fn processed(&mut self, dir: &Path, a: Appended) {
        if let Some(j) = self.by_root.get_mut(root_of(dir)) {
            j.space.processed(a, Some(dir));
        }
    }

    /// Keeps `dir`'s journal at exit (its JSON files could not be written).
    pub(super) fn keep(&mut self, dir: &Path) {
        if let Some(j) = self.by_root.get_mut(root_of(dir)) {
            j.keep = true;
        }
    }

    /// The disk is full: the journal of `dir`'s dump path gives its space back at once, for the
    /// JSON files that hold the same texts once written (see `Worker::write`). Whether it did.
    pub(super) fn discard(&mut self, dir: &Path) -> bool {
        let Some(j) = self.by_root.get_mut(root_of(dir)) else { return false };
        if !j.sink.discard() {
            return false;
        }
        j.space = Space::new(j.sink.base());
        j.keep = false;
        true
    }

    /// `dir`'s JSON files were written: the journal is made durable when so configured.
    pub(super) fn checkpoint(&self, dir: &Path) {
        if let Some(j) = self.by_root.get(root_of(dir)) {
            j.sink.checkpoint();
        }
    }

    /// `dir` is closed (or could not be created): its entries are no longer needed, and what
    /// no open directory needs is given back.
    pub(super) fn closed(&mut self, dir: &Path) {
        let Some(j) = self.by_root.get_mut(root_of(dir)) else { return };
        j.space.closed(dir);
        if !j.keep && j.sink.release(j.space.low()) {
            j.space.reset(j.sink.base());
        }
    }

    /// The writer has nothing to do: room is made ahead of the capturing threads' appends.
    pub(super) fn prepare(&self) {
        for j in self.by_root.values() {
            j.sink.prepare();
        }
    }

    /// Ends every journal (the process ends cleanly).
    pub(super) fn finish(&mut self) {
        for (_, j) in self.by_root.drain() {
            j.sink.finish(j.keep);
        }
    }
}

/// A `D` entry of `dir` (relative name `rel`): its header, and its device and inode once it
/// exists.
pub(super) fn dir_entry(rel: &str, header: &Header, id: Option<(u64, u64)>) -> Vec<u8> {
    let mut e = Vec::new();
    journal::entry(&mut e, 'D', rel, "", &journal::dir_text(header, id));
    e
}
