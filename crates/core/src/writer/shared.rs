//! What the writer thread and a caller waiting for the files share (the queue, the worker behind
//! its lock, the tensor files being written outside it), and the writer thread's loop.

use super::doorbell::Doorbell;
use super::finished::Counters;
use super::progress::DrainProgress;
use super::worker::{FileJob, Msg, Worker};
use crate::budget::Budget;
use crossbeam_channel::Receiver;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// What the writer thread and a waiting caller share: the queue and the state behind it.
/// Messages are taken from the queue only while holding `worker`, so they are handled in the
/// order they were sent whoever handles them.
///
/// Tensor files are written after the lock is released ([`FileJob`]); `jobs` counts those being
/// written, and whatever must see them on disk (JSON files, a waiting caller's return) waits
/// until it is 0 first.
pub(super) struct Shared {
    rx: Receiver<Msg>,
    worker: Mutex<Worker>,
    jobs: Mutex<usize>,
    jobs_done: Condvar,
    counters: Arc<Counters>,
    budget: Arc<Budget>,
}

impl Shared {
    pub(super) fn new(rx: Receiver<Msg>, worker: Worker, counters: Arc<Counters>, budget: Arc<Budget>) -> Shared {
        Shared { rx, worker: Mutex::new(worker), jobs: Mutex::new(0), jobs_done: Condvar::new(), counters, budget }
    }

    /// Messages in the queue.
    pub(super) fn queued(&self) -> usize {
        self.rx.len()
    }

    fn worker(&self) -> std::sync::MutexGuard<'_, Worker> {
        // A panic while handling a message (caught at the FFI edge) leaves the state usable:
        // each message is handled on its own.
        self.worker.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Handles `m` under the lock `w`; tensor files it produced are returned, counted in `jobs`,
    /// for the caller to write with [`Shared::write_files`] once it has dropped `w`.
    fn handle(&self, w: &mut Worker, m: Msg) -> Option<FileJob> {
        if let Msg::Write { .. } = m {
            self.wait_for_files();
        }
        let job = w.handle(m)?;
        *self.jobs.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        Some(job)
    }

    fn write_files(&self, job: FileJob) {
        job.run(&self.counters, &self.budget);
        let mut n = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        *n -= 1;
        if *n == 0 {
            self.jobs_done.notify_all();
        }
    }

    /// Returns when no tensor file is being written. Called holding the worker lock, so no new
    /// file job can start meanwhile; the running ones do not need that lock to finish.
    fn wait_for_files(&self) {
        let n = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        drop(self.jobs_done.wait_while(n, |n| *n > 0).unwrap_or_else(|e| e.into_inner()));
    }

    /// Handles everything queued, in order, writing tensor files as it goes (beside the writer
    /// thread, if it is working too), and returns holding the lock once the queue is empty, the
    /// journal entries are in their files and no tensor file is being written.
    /// A long wait shows its progress (see `progress`).
    pub(super) fn drain(&self) -> std::sync::MutexGuard<'_, Worker> {
        let mut progress = DrainProgress::new(&self.budget);
        let w = 'relock: loop {
            let mut w = self.worker();
            while let Ok(m) = self.rx.try_recv() {
                progress.tick();
                if let Some(job) = self.handle(&mut w, m) {
                    drop(w);
                    self.write_files(job);
                    continue 'relock;
                }
            }
            self.wait_for_files_ticking(&mut progress);
            break w;
        };
        progress.finish();
        w
    }

    /// [`Shared::wait_for_files`], ticking `progress` while the writer thread writes.
    fn wait_for_files_ticking(&self, progress: &mut DrainProgress<'_>) {
        let mut n = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        while *n > 0 {
            progress.tick();
            n = self.jobs_done.wait_timeout(n, Duration::from_millis(100)).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// The writer thread.
    pub(super) fn run(&self, bell: &Doorbell) {
        /// Messages handled per hold of the lock, so a waiting caller gets in soon.
        const BATCH: usize = 64;
        let mut worked = false;
        loop {
            let mut w = self.worker();
            let mut idle = false;
            let mut files = None;
            for _ in 0..BATCH {
                match self.rx.try_recv() {
                    Ok(m) => {
                        worked = true;
                        files = self.handle(&mut w, m);
                        if files.is_some() {
                            break;
                        }
                    }
                    Err(crossbeam_channel::TryRecvError::Empty) => {
                        idle = true;
                        break;
                    }
                    Err(crossbeam_channel::TryRecvError::Disconnected) => {
                        // The process is ending.
                        self.wait_for_files();
                        w.close_all();
                        return;
                    }
                }
            }
            if let Some(job) = files {
                drop(w);
                self.write_files(job);
                continue;
            }
            if idle {
                // The JSON files are brought up to date before we wait.
                if *self.jobs.lock().unwrap_or_else(|e| e.into_inner()) == 0 {
                    w.refresh();
                }
                drop(w);
                bell.sleep(!std::mem::take(&mut worked), &self.rx);
            }
        }
    }
}
