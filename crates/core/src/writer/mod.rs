//! The background writer: tensor files, the journal, and dump.json / stack.json / construct.json.
//!
//! Capturing threads hand finished records to one writer thread through a bounded crossbeam
//! channel, and wake it only when needed (see `Doorbell`). A thread that must wait for the
//! files (a synchronous `stop()`, a flush) does not wake the writer and sleep until it replies:
//! it takes the writer's state and does the queued work itself (see [`Writer::sync`]), which
//! spares it two thread wake-ups per stop. Tensor files are written outside the state's lock,
//! so that caller and the writer thread write them side by side. Tensor bytes in flight are capped
//! by a [`Budget`](crate::budget::Budget) that either blocks the capturing thread or drops (and
//! counts) data. Each record arrives formatted (by the recorder, on the capturing thread, into
//! exactly the text it will have inside dump.json) and already in the process's
//! [`journal`](crate::journal); the writer journals the directories it creates and gives back the
//! journal space of those it closed (`journaling`). A writer used alone (no recorder) formats and
//! journals records itself. A killed process therefore leaves what `msprobe recover` needs to
//! rebuild its JSON files. The JSON files
//! are created with msprobe's skeleton when a step directory opens, kept open, and written in
//! place (extended when they only gained entries, see `JsonFiles`) by the writer whenever it runs
//! out of work, and at stop, step end and exit. A write the file system refuses (disk full, over
//! quota, read-only, I/O error) stops capture with one message (see `worker`): the JSON files keep
//! their last valid text (see `JsonFiles`), a tensor file whose write failed is removed, records
//! still queued are dropped, and the [`Counters`] say what was lost.
//!
//! How the pieces fit, from the capture side down (each uses only those after it):
//! - `handle`: [`Writer`], the handle: sends messages, starts the thread with the first one,
//!   and lets a caller that must wait for the files do the queued work itself.
//! - `shared`: what the writer thread and such a caller share (the queue, the worker behind its
//!   lock, the count of tensor files being written outside it), and the writer thread's loop.
//! - `progress`: what a caller waiting long for the files shows (a bar, or log lines).
//! - `doorbell`: when a sender wakes the writer thread, and how the writer naps and sleeps.
//! - `worker`: the messages and their handling: rank directories created and opened, records
//!   stored, tensor files handed back to be written outside the lock, JSON files written,
//!   refreshed and closed.
//! - `journaling`: the journal of each dump path as the writer sees it: its own entries, and
//!   the space still needed.
//! - `in_place`: the JSON files of an open directory, kept open and written in place.
//! - `dir_state`: [`DirState`], what a directory's JSON files hold and their whole text.
//! - `json_files`: [`JsonFile`], the three files, and the layout of their text.
//! - `finished`: what the recorder hands over ([`Finished`] records) and the [`Counters`] it reads.
//!
//! Outside this module: the byte budget is in [`crate::budget`], the dump.json header in
//! [`crate::header`], the journal format in [`crate::journal`], and its replay into a dump
//! directory (`msprobe recover`) in the `recover` module, above this one.

mod dir_state;
mod doorbell;
mod finished;
mod handle;
mod in_place;
mod journaling;
mod json_files;
mod progress;
mod shared;
mod worker;

pub use dir_state::{parent_text, pretty, stack_text, DirState, RECORD_DEPTH};
pub use handle::Writer;
pub use json_files::JsonFile;

pub use finished::{Counters, Finished, Journaled, TENSOR_DIR};
