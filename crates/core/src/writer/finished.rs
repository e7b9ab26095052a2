//! What crosses from the recorder to the writer: finished records, and the counters the recorder
//! reads back for the run summary.

use crate::journal::Appended;
use crate::json::Json;
use crate::record::TensorFile;
use std::sync::atomic::{AtomicBool, AtomicU64};

pub const TENSOR_DIR: &str = "dump_tensor_data";

/// A record ready for disk.
pub struct Finished {
    pub name: String,
    pub body: Json,
    pub files: Vec<TensorFile>,
    pub stack: Option<Vec<String>>,
    pub parent: Option<Option<String>>,
    /// Budget bytes to release once the files are written.
    pub reserved: u64,
}

/// A record the capturing thread formatted and journaled itself: its texts (exactly as they go
/// into dump.json, stack.json and construct.json) and where its entries went in the journal.
pub struct Journaled {
    pub text: String,
    pub stack: Option<String>,
    pub parent: Option<String>,
    pub span: Appended,
}

/// Counters shared with the recorder for the run summary.
#[derive(Default, Debug)]
pub struct Counters {
    pub records: AtomicU64,
    pub files: AtomicU64,
    pub bytes: AtomicU64,
    pub dropped: AtomicU64,
    pub errors: AtomicU64,
    /// A step directory could not be created: the recorder turns capture off.
    pub dir_failed: AtomicBool,
}
