//! The handle capture paths use: [`Writer`] sends messages to the writer thread (starting it with
//! the first), rings it when it must come now, and lets a caller that must wait for the files do
//! the queued work itself.

use super::doorbell::Doorbell;
use super::finished::{Counters, Finished, Journaled};
use super::shared::Shared;
use super::worker::{Msg, Worker};
use crate::budget::Budget;
use crate::header::Header;
use crate::journal::Sink;
use crossbeam_channel::{bounded, Sender};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The sending end and the shared state, once the thread runs.
struct Link {
    tx: Sender<Msg>,
    shared: Arc<Shared>,
}

/// The handle capture paths use. The thread starts with the first message.
pub struct Writer {
    link: Mutex<Option<Link>>,
    bell: Arc<Doorbell>,
    /// Set by `shutdown`: later messages are dropped (counted) instead of starting a new thread.
    stopped: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
    pub budget: Arc<Budget>,
    pub counters: Arc<Counters>,
    /// Messages sent so far, and how many of them a waiting write ([`Writer::sync`]) had
    /// handled when it last returned: equal means nothing was sent since.
    sent: AtomicU64,
    synced: AtomicU64,
}

impl Writer {
    pub fn new(budget: Budget) -> Writer {
        Writer {
            link: Mutex::new(None),
            bell: Arc::new(Doorbell::new()),
            stopped: AtomicBool::new(false),
            thread: Mutex::new(None),
            budget: Arc::new(budget),
            counters: Arc::new(Counters::default()),
            sent: AtomicU64::new(0),
            synced: AtomicU64::new(0),
        }
    }

    /// A sender to the writer, started here on first use; None once shut down.
    fn sender(&self) -> Option<Sender<Msg>> {
        let mut link = self.link.lock().unwrap_or_else(|e| e.into_inner());
        if self.stopped.load(Relaxed) {
            return None;
        }
        if link.is_none() {
            let (s, r) = bounded::<Msg>(4096);
            let worker = Worker::new(self.counters.clone(), self.budget.clone());
            let shared = Arc::new(Shared::new(r, worker, self.counters.clone(), self.budget.clone()));
            let (bell, sh) = (self.bell.clone(), shared.clone());
            let handle = std::thread::Builder::new().name("msprobe-writer".into()).spawn(move || sh.run(&bell));
            match handle {
                Ok(h) => {
                    *self.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(h);
                    *link = Some(Link { tx: s, shared });
                }
                Err(e) => {
                    log::error!("cannot start the writer thread: {e}");
                    return None;
                }
            }
        }
        link.as_ref().map(|l| l.tx.clone())
    }

    /// The writer's shared state if it runs (nothing was sent otherwise).
    fn shared(&self) -> Option<Arc<Shared>> {
        self.link.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|l| l.shared.clone())
    }

    fn send(&self, m: Msg) {
        let urgent = match &m {
            Msg::Record { rec, .. } => !rec.files.is_empty(),
            Msg::Open { .. } | Msg::Construct { .. } | Msg::Journal { .. } | Msg::Span { .. } => false,
            Msg::Write { .. } => true,
        };
        self.send_as(m, urgent);
    }

    /// Sends `m`, ringing a napping writer when `urgent`.
    fn send_as(&self, m: Msg, urgent: bool) {
        self.sent.fetch_add(1, Relaxed);
        let Some(tx) = self.sender() else {
            // Shut down (or the thread could not start): a record is lost, counted, and gives
            // its budget back; other messages have nothing left to do.
            if let Msg::Record { rec, .. } = m {
                self.counters.dropped.fetch_add(1, Relaxed);
                self.budget.release(rec.reserved);
            }
            return;
        };
        if tx.is_full() {
            self.bell.ring();
        }
        if let Err(e) = tx.send(m) {
            self.counters.errors.fetch_add(1, Relaxed);
            if let Msg::Record { rec, .. } = e.0 {
                self.budget.release(rec.reserved);
            }
        }
        self.bell.after_send(urgent, tx.len());
    }

    /// Whether a step directory could not be created or the storage failed (disk full, I/O
    /// error): capture must stop.
    pub fn failed(&self) -> bool {
        self.counters.dir_failed.load(Relaxed) || self.counters.storage_failed.load(Relaxed)
    }

    /// An error writing under dump path `root` outside the writer (the crash journal): counted,
    /// and, when the storage failed, capture stops with the one message that says so.
    pub fn report_error(&self, root: &Path, what: &str, e: &std::io::Error) {
        super::worker::report(&self.counters, root, what, e);
    }

    /// Opens `{root}/step{N}/rank{R}`: the writer creates it (the root must exist).
    pub fn open(&self, dir: PathBuf, header: Header) {
        self.send(Msg::Open { dir, header });
    }

    pub fn record(&self, dir: PathBuf, rec: Finished) {
        self.send(Msg::Record { dir, rec, journaled: None });
    }

    /// Hands over a record the capturing thread journaled itself (`rec.body`, `stack` and
    /// `parent` are unused: `j` holds their texts).
    pub fn record_journaled(&self, dir: PathBuf, rec: Finished, j: Journaled) {
        self.send(Msg::Record { dir, rec, journaled: Some(j) });
    }

    /// Journal entries of `dir` a capturing thread appended that no record message carries (a
    /// planned record): accounted so the journal's space can be given back.
    pub fn journal_span(&self, dir: PathBuf, span: crate::journal::Appended) {
        self.send(Msg::Span { dir, span });
    }

    /// The recorder's journal of dump path `root`, which its capturing threads append to; sent
    /// before the first directory of `root` opens.
    pub fn journal(&self, root: PathBuf, sink: Arc<dyn Sink>) {
        self.send(Msg::Journal { root, sink });
    }

    /// Writes the JSON files of `dir`; `close` also ends the directory (step end). A step end
    /// right after a waiting write (`stop()`), with nothing sent since, has nothing left to
    /// write but the journal's reset: it does not ring a napping writer (a thread wake-up,
    /// about 20 µs of the step on this VM), which takes it when its nap ends.
    pub fn write(&self, dir: PathBuf, close: bool) {
        let quiet = close && self.sent.load(Relaxed) == self.synced.load(Relaxed);
        self.send_as(Msg::Write { dir, close }, !quiet);
    }

    /// Adds a construct.json entry on its own (msprobe records a module's parent when the
    /// module starts, before its record completes).
    pub fn construct(&self, dir: PathBuf, name: String, parent: Option<String>) {
        self.send(Msg::Construct { dir, name, parent });
    }

    /// Returns once everything sent so far is on disk. The caller does the queued work itself,
    /// in order, under the writer's lock (waiting only for the message the writer is handling):
    /// waking the writer and sleeping until it replies cost a `stop()` two thread wake-ups,
    /// about as long as writing the step's JSON files.
    pub fn sync(&self) {
        if let Some(shared) = self.shared() {
            let sent = self.sent.load(Relaxed);
            self.call_help(&shared);
            drop(shared.drain());
            self.synced.store(sent, Relaxed);
        }
    }

    /// Rings a napping writer when more than one record and tensor bytes are queued, so that
    /// it writes tensor files beside the waiting caller. Without files there is nothing to
    /// share (the rest is done under one lock) and the ring would only cost the caller.
    fn call_help(&self, shared: &Shared) {
        if shared.queued() > 1 && !self.bell.is_awake() && self.budget.in_flight() > 0 {
            self.bell.ring();
        }
    }

    /// Writes the JSON files of `dir` (`close`: and ends it) after everything queued, and
    /// returns when all of it is on disk. Same as [`write`](Self::write) then
    /// [`sync`](Self::sync), without ringing the writer.
    pub fn write_now(&self, dir: &Path, close: bool) {
        if let Some(shared) = self.shared() {
            let sent = self.sent.load(Relaxed);
            self.call_help(&shared);
            shared.drain().write(dir, close);
            self.synced.store(sent, Relaxed);
        }
    }

    /// Closes every directory and stops the thread.
    pub fn shutdown(&self) {
        let link = {
            let mut g = self.link.lock().unwrap_or_else(|e| e.into_inner());
            self.stopped.store(true, Relaxed);
            g.take()
        };
        drop(link);
        self.bell.close();
        if let Some(h) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::finished::TENSOR_DIR;
    use super::*;
    use crate::journal;
    use crate::json::{self, Json};
    use crate::record::TensorFile;

    /// The writer is rung only for urgent messages or after a deep sleep; a lone record must
    /// still reach the journal without any flush, both right after another batch (nap) and
    /// after the writer went back to sleep. Shutdown must not hang either.
    #[test]
    fn lone_records_are_written_without_a_flush() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("step0").join("rank0");
        let w = Writer::new(Budget::new(1 << 20, true));
        let header = Header { task: "statistics".into(), level: "L1".into(), dump_data_dir: None };
        w.open(dir.clone(), header);
        let journal = root.path().join(format!("{}{}", journal::PREFIX, std::process::id()));
        let wait_for = |name: &str| {
            let t0 = std::time::Instant::now();
            while t0.elapsed() < std::time::Duration::from_secs(5) {
                if std::fs::read_to_string(&journal).is_ok_and(|j| j.contains(name)) {
                    return true;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            false
        };
        for (i, pause) in [0u64, 0, 20, 0, 50].iter().enumerate() {
            std::thread::sleep(std::time::Duration::from_millis(*pause));
            let name = format!("Functional.relu.{i}.forward");
            let body = json::parse(r#"{"input_args": [], "output": []}"#).unwrap();
            w.record(
                dir.clone(),
                Finished { name: name.clone(), body, files: vec![], stack: None, parent: None, reserved: 0 },
            );
            assert!(wait_for(&name), "{name} never reached the journal");
        }
        w.shutdown();
    }

    /// A waiting write (a synchronous `stop()`) handles the queue itself while the writer thread
    /// and other senders are busy: each time it returns, dump.json holds every record its own
    /// thread sent before it, and each sender's records form a prefix in sending order.
    #[test]
    fn a_waiting_write_has_everything_sent_before_it_in_order() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("step0").join("rank0");
        let w = Arc::new(Writer::new(Budget::new(1 << 20, true)));
        let header = Header { task: "statistics".into(), level: "L1".into(), dump_data_dir: None };
        w.open(dir.clone(), header);
        const N: usize = 300;
        fn send(w: &Writer, dir: &Path, s: usize, i: usize) {
            let body = json::parse(r#"{"input_args": [], "output": []}"#).unwrap();
            let name = format!("Functional.s{s}.{i}.forward");
            w.record(dir.to_path_buf(), Finished { name, body, files: vec![], stack: None, parent: None, reserved: 0 });
        }
        // Per sender (2 threads, then this one): how many of its records dump.json holds,
        // checking that they come in sending order. The writer thread may be extending the file
        // in place while it is read (an idle refresh right after `write_now` lets go of the lock):
        // a read cut by that write is transient, read again.
        let counts = || -> [usize; 3] {
            let read = || json::parse(&std::fs::read_to_string(dir.join("dump.json")).unwrap());
            let v = (0..1000).find_map(|_| read().ok()).expect("dump.json never parsed in 1000 reads");
            let Some(Json::Object(data)) = v.get("data") else { panic!("no data in dump.json") };
            let mut n = [0usize; 3];
            for (name, _) in data {
                let mut parts = name.split('.').skip(1);
                let s: usize = parts.next().unwrap()[1..].parse().unwrap();
                let i: usize = parts.next().unwrap().parse().unwrap();
                assert_eq!(i, n[s], "sender {s}: {name} out of order");
                n[s] += 1;
            }
            n
        };
        let senders: Vec<_> = (0..2)
            .map(|s| {
                let (w, dir) = (w.clone(), dir.clone());
                std::thread::spawn(move || (0..N).for_each(|i| send(&w, &dir, s, i)))
            })
            .collect();
        let (mut mine, mut last) = (0, [0usize; 3]);
        while mine < 5 || !senders.iter().all(|t| t.is_finished()) {
            send(&w, &dir, 2, mine);
            mine += 1;
            w.write_now(&dir, false);
            let n = counts();
            assert_eq!(n[2], mine, "a record sent before the write is missing");
            assert!(n[0] >= last[0] && n[1] >= last[1], "{n:?} after {last:?}");
            last = n;
        }
        senders.into_iter().for_each(|t| t.join().unwrap());
        w.write_now(&dir, false);
        assert_eq!(counts(), [N, N, mine]);
        w.shutdown();
    }

    /// Tensor files are written outside the worker's lock, by the writer thread and by a waiting
    /// caller side by side; a waiting write still returns only when every file sent before it
    /// is complete on disk and its budget is released.
    #[test]
    fn a_waiting_write_returns_with_every_tensor_file_written() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("step0").join("rank0");
        let w = Writer::new(Budget::new(1 << 30, false));
        w.open(dir.clone(), Header { task: "tensor".into(), level: "L1".into(), dump_data_dir: None });
        let bytes = |r: usize, f: usize| vec![(r * 7 + f) as u8; 1000 + 37 * r + f];
        let mut sent = 0;
        for round in 0..20 {
            let n = 1 + round % 7;
            for r in sent..sent + n {
                let files: Vec<_> =
                    (0..3).map(|f| TensorFile { name: format!("R.{r}.{f}.pt"), bytes: bytes(r, f) }).collect();
                let reserved = files.iter().map(|f| f.bytes.len() as u64).sum();
                assert!(w.budget.reserve(reserved));
                let body = json::parse(r#"{"output": []}"#).unwrap();
                w.record(
                    dir.clone(),
                    Finished { name: format!("R.{r}.forward"), body, files, stack: None, parent: None, reserved },
                );
            }
            sent += n;
            w.write_now(&dir, false);
            for r in 0..sent {
                for f in 0..3 {
                    let got = std::fs::read(dir.join(TENSOR_DIR).join(format!("R.{r}.{f}.pt"))).unwrap();
                    assert!(got == bytes(r, f), "R.{r}.{f}.pt is not complete after the waiting write");
                }
            }
            assert_eq!(w.budget.in_flight(), 0);
            assert_eq!(w.counters.files.load(Relaxed), 3 * sent as u64);
            let v = json::parse(&std::fs::read_to_string(dir.join("dump.json")).unwrap()).unwrap();
            let Some(Json::Object(data)) = v.get("data") else { panic!("no data in dump.json") };
            assert_eq!(data.len(), sent);
        }
        w.shutdown();
        assert_eq!(w.counters.records.load(Relaxed), sent as u64);
    }
}
