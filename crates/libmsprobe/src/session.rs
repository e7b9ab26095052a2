//! The process's one recorder, shared by the C ABI (the Python layers' records) and the L2
//! interposer (kernel records), so both write into the same dump.
//!
//! A forked child has none of the writer's threads: from `pthread_atfork` on, it sees no
//! recorder and records nothing.

use msprobe_core::config::Config;
use msprobe_core::recorder::Recorder;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

static GLOBAL: RwLock<Option<Arc<Recorder>>> = RwLock::new(None);

/// Set in a forked child: every later lookup finds no recorder.
static FORKED: AtomicBool = AtomicBool::new(false);

/// Marks this process as a forked child (a `pthread_atfork` child handler; never unwinds).
pub(crate) extern "C" fn forked_child() {
    FORKED.store(true, Relaxed);
}

/// The process's recorder, if initialised (never in a forked child).
pub(crate) fn recorder() -> Option<Arc<Recorder>> {
    if FORKED.load(Relaxed) {
        return None;
    }
    GLOBAL.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Installs `r` as the process's recorder. Returns false if one exists already.
pub(crate) fn install(r: Recorder) -> bool {
    let mut g = GLOBAL.write().unwrap_or_else(|e| e.into_inner());
    if g.is_some() {
        return false;
    }
    *g = Some(Arc::new(r));
    true
}

/// A recorder for this process: its crash journal is a shared file mapping, which capturing
/// threads append their records to without a system call (`mmap-journal`).
pub(crate) fn new_recorder(cfg: Config) -> Recorder {
    Recorder::with_journal(cfg, mmap_journal::MmapSink::open)
}
