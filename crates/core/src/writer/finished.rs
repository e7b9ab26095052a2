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
    /// Records in dump.json files: counted when a write of their directory's dump.json that
    /// holds them succeeded.
    pub records: AtomicU64,
    pub files: AtomicU64,
    pub bytes: AtomicU64,
    /// Records not in dump.json: their directory could not be created, they reached the writer
    /// after a storage failure, or no write of dump.json that held them succeeded.
    pub dropped: AtomicU64,
    pub errors: AtomicU64,
    /// Tensor files the writer was given but did not write (write errors, a storage failure, a
    /// directory that could not be created), and their bytes. Of a record in dump.json, such a
    /// file is named (`data_name`) but absent.
    pub files_lost: AtomicU64,
    pub bytes_lost: AtomicU64,
    /// A step directory could not be created: the recorder turns capture off.
    pub dir_failed: AtomicBool,
    /// The dump's file system refused a write (full, over quota, read-only, I/O error, see
    /// `fsutil::is_storage_failure`): the recorder turns capture off and the writer writes
    /// nothing new (records still queued are dropped), only the JSON files of what it holds.
    pub storage_failed: AtomicBool,
}
