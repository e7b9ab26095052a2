//! Streams (one worker thread each, FIFO) and events.
use std::collections::HashMap;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

pub type Task = Box<dyn FnOnce() -> Result<(), i32> + Send>;

#[derive(Default)]
struct Progress {
    submitted: u64,
    completed: u64,
    error: i32,
    /// The failed task's own message (its `aclGetRecentErrMsg` text on the worker thread).
    message: Option<String>,
}

/// The sticky error `e` as the synchronising thread reports it: the failed kernel's message.
fn report(e: i32, message: Option<&str>) -> i32 {
    let m = message.map(|m| m.split_once(": ").map_or(m, |(_, rest)| rest)).unwrap_or("no message");
    crate::errmsg::fail(e, format!("a task on this stream failed: {m}"))
}

pub struct Stream {
    pub id: usize,
    tx: Mutex<Option<Sender<(u64, Task)>>>,
    prog: Mutex<Progress>,
    cv: Condvar,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Stream {
    fn new(id: usize) -> Arc<Stream> {
        let (tx, rx) = channel::<(u64, Task)>();
        let s = Arc::new(Stream {
            id,
            tx: Mutex::new(Some(tx)),
            prog: Mutex::default(),
            cv: Condvar::new(),
            worker: Mutex::new(None),
        });
        let w = Arc::downgrade(&s);
        let h = std::thread::Builder::new()
            .name(format!("cannsim-stream-{id:x}"))
            .spawn(move || {
                while let Ok((seq, task)) = rx.recv() {
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(task))
                        .unwrap_or(Err(crate::consts::ACL_ERROR_RT_INTERNAL_ERROR));
                    let Some(s) = w.upgrade() else { break };
                    let mut p = s.prog.lock().unwrap();
                    p.completed = seq;
                    if let Err(e) = r {
                        if p.error == 0 {
                            p.error = e;
                            p.message = crate::errmsg::take_last();
                        }
                    }
                    s.cv.notify_all();
                }
            })
            .expect("spawn stream worker");
        *s.worker.lock().unwrap() = Some(h);
        s
    }

    /// Enqueue a task; it runs after every task enqueued before it on this stream.
    pub fn submit(&self, t: Task) -> Result<(), i32> {
        let mut p = self.prog.lock().unwrap();
        let tx = self.tx.lock().unwrap();
        let tx = tx.as_ref().ok_or(crate::consts::ACL_ERROR_INVALID_RESOURCE_HANDLE)?;
        p.submitted += 1;
        tx.send((p.submitted, t)).map_err(|_| crate::consts::ACL_ERROR_RT_INTERNAL_ERROR)
    }

    /// Wait for all work submitted so far. Returns (and clears) the sticky error of a failed task.
    pub fn synchronize(&self, timeout: Option<Duration>) -> Result<(), i32> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut p = self.prog.lock().unwrap();
        let target = p.submitted;
        while p.completed < target {
            match deadline {
                None => p = self.cv.wait(p).unwrap(),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(crate::consts::ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
                    }
                    p = self.cv.wait_timeout(p, d - now).unwrap().0;
                }
            }
        }
        let e = std::mem::take(&mut p.error);
        let m = p.message.take();
        if e != 0 {
            Err(report(e, m.as_deref()))
        } else {
            Ok(())
        }
    }

    /// Wait for all work submitted so far, leaving the sticky error in place (for the client's own
    /// sync) and returning it: what a call that runs its kernel synchronously sees.
    pub fn wait_done(&self) -> Result<(), i32> {
        let mut p = self.prog.lock().unwrap();
        let target = p.submitted;
        while p.completed < target {
            p = self.cv.wait(p).unwrap();
        }
        if p.error != 0 {
            Err(report(p.error, p.message.as_deref()))
        } else {
            Ok(())
        }
    }

    /// True if every submitted task has completed.
    pub fn idle(&self) -> bool {
        let p = self.prog.lock().unwrap();
        p.completed == p.submitted
    }

    fn shutdown(&self) {
        self.tx.lock().unwrap().take();
        if let Some(h) = self.worker.lock().unwrap().take() {
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }
}

struct Registry {
    streams: HashMap<usize, Arc<Stream>>,
    default: Option<Arc<Stream>>,
    next: usize,
}

fn reg() -> &'static Mutex<Registry> {
    static R: OnceLock<Mutex<Registry>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(Registry { streams: HashMap::new(), default: None, next: 0x5100_0000 }))
}

/// Create a stream; its handle is an opaque non-NULL token.
pub fn create() -> usize {
    let mut r = reg().lock().unwrap();
    r.next += 0x40;
    let id = r.next;
    r.streams.insert(id, Stream::new(id));
    id
}

/// Resolve a stream handle (0 = the default stream).
pub fn get(h: usize) -> Option<Arc<Stream>> {
    let mut r = reg().lock().unwrap();
    if h == 0 {
        if r.default.is_none() {
            r.default = Some(Stream::new(0));
        }
        return r.default.clone();
    }
    r.streams.get(&h).cloned()
}

/// Destroy a stream after draining its queue.
pub fn destroy(h: usize, force: bool) -> Result<(), i32> {
    let s = reg().lock().unwrap().streams.remove(&h).ok_or(crate::consts::ACL_ERROR_RT_PARAM_INVALID)?;
    if !force {
        let _ = s.synchronize(None);
    }
    s.shutdown();
    Ok(())
}

/// Wait for all streams.
pub fn synchronize_all(timeout: Option<Duration>) -> Result<(), i32> {
    let all: Vec<Arc<Stream>> = {
        let r = reg().lock().unwrap();
        r.streams.values().cloned().chain(r.default.clone()).collect()
    };
    let mut res = Ok(());
    for s in all {
        if let Err(e) = s.synchronize(timeout) {
            res = Err(e);
        }
    }
    res
}

/// Kernel delay (`CANNSIM_KERNEL_DELAY_US`), applied by every kernel task before it runs.
pub fn kernel_delay() {
    static D: OnceLock<u64> = OnceLock::new();
    let d = *D.get_or_init(|| crate::env_num("CANNSIM_KERNEL_DELAY_US", 0u64));
    if d > 0 {
        std::thread::sleep(Duration::from_micros(d));
    }
}

// ---------------------------------------------------------------- events

#[derive(Default)]
struct EvState {
    recorded: u64,
    completed: u64,
    time: Option<Instant>,
}

pub struct Event {
    st: Mutex<EvState>,
    cv: Condvar,
}

fn events() -> &'static Mutex<HashMap<usize, Arc<Event>>> {
    static E: OnceLock<Mutex<HashMap<usize, Arc<Event>>>> = OnceLock::new();
    E.get_or_init(|| Mutex::new(HashMap::new()))
}

pub fn event_create() -> usize {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0x00e7_0000_0040);
    let e = Arc::new(Event { st: Mutex::default(), cv: Condvar::new() });
    let h = NEXT.fetch_add(0x40, std::sync::atomic::Ordering::Relaxed);
    events().lock().unwrap().insert(h, e);
    h
}
pub fn event_get(h: usize) -> Option<Arc<Event>> {
    events().lock().unwrap().get(&h).cloned()
}
pub fn event_destroy(h: usize) -> bool {
    events().lock().unwrap().remove(&h).is_some()
}

impl Event {
    /// Record on a stream: the event completes when the stream reaches this point.
    pub fn record(self: &Arc<Self>, s: &Stream) -> Result<(), i32> {
        let gen = {
            let mut st = self.st.lock().unwrap();
            st.recorded += 1;
            st.recorded
        };
        let me = self.clone();
        s.submit(Box::new(move || {
            let mut st = me.st.lock().unwrap();
            if st.completed < gen {
                st.completed = gen;
                st.time = Some(Instant::now());
            }
            me.cv.notify_all();
            Ok(())
        }))
    }
    pub fn is_complete(&self) -> bool {
        let st = self.st.lock().unwrap();
        st.completed >= st.recorded
    }
    pub fn was_recorded(&self) -> bool {
        self.st.lock().unwrap().recorded > 0
    }
    pub fn time(&self) -> Option<Instant> {
        self.st.lock().unwrap().time
    }
    /// Wait until the recording generation `gen` (default: the latest) completes.
    pub fn wait(&self, gen: Option<u64>) {
        let mut st = self.st.lock().unwrap();
        let g = gen.unwrap_or(st.recorded);
        while st.completed < g {
            st = self.cv.wait(st).unwrap();
        }
    }
    /// Make `s` wait for the latest recording of this event.
    pub fn stream_wait(self: &Arc<Self>, s: &Stream) -> Result<(), i32> {
        let g = self.st.lock().unwrap().recorded;
        let me = self.clone();
        s.submit(Box::new(move || {
            me.wait(Some(g));
            Ok(())
        }))
    }
}

#[cfg(test)]
mod t {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    #[test]
    fn fifo_and_sync() {
        let h = create();
        let s = get(h).unwrap();
        let c = Arc::new(AtomicUsize::new(0));
        for i in 0..10 {
            let c2 = c.clone();
            s.submit(Box::new(move || {
                assert_eq!(c2.fetch_add(1, Ordering::SeqCst), i);
                Ok(())
            }))
            .unwrap();
        }
        s.submit(Box::new(|| Err(7))).unwrap();
        assert_eq!(s.synchronize(None), Err(7));
        assert_eq!(s.synchronize(None), Ok(()));
        assert_eq!(c.load(Ordering::SeqCst), 10);
        let e = event_get(event_create()).unwrap();
        e.record(&s).unwrap();
        e.wait(None);
        assert!(e.is_complete());
        destroy(h, false).unwrap();
    }
}
