//! Ending the run on SIGTERM and SIGINT, and at every exit path of a Python process.
//!
//! A record is durable once its hooked call returns (the crash journal); these make the files
//! whole as well, and print the run summary, when the process is asked to end:
//!
//! - SIGTERM / SIGINT whose disposition was the default (the process would have died): the
//!   handler only writes the signal number into a pipe (async-signal-safe) and returns; the
//!   `msprobe-signal` thread, woken by it, finishes the recorder (the JSON files written, the
//!   journal removed, the summary logged), waiting at most [`FINISH_WAIT`], then restores the
//!   default disposition and sends the signal again: the process dies of it, as it would have.
//!   A second signal while finishing kills at once.
//! - A disposition the program set (a handler: Python's SIGINT handler raising
//!   KeyboardInterrupt, a framework's SIGTERM handler): that handler is called, and the program
//!   decides; the exit hooks below finish the files if it exits. An ignored signal stays ignored.
//! - Exit hooks: `atexit`, and in a Python process also `Py_AtExit`, whose functions run at
//!   the end of the interpreter's finalization on every exit path, including an uncaught
//!   KeyboardInterrupt, which ends the process by re-sending SIGINT (so `atexit` never runs).
//!
//! SIGSEGV, SIGABRT, SIGBUS: nothing is done (no JSON is written from a crashing process); the
//! journal holds every record whose call returned, and `msprobe recover` completes the files.
//!
//! A forked child (the handlers are inherited) behaves as if they were not installed.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicUsize, Ordering::*};
use std::sync::Once;
use std::time::Duration;

/// How long the signal thread waits for the files before letting the signal kill the process.
pub const FINISH_WAIT: Duration = Duration::from_secs(10);

/// How long it waits for the records being built when the signal came.
const QUIESCE_WAIT: Duration = Duration::from_millis(500);

const SIGNALS: [libc::c_int; 2] = [libc::SIGTERM, libc::SIGINT];

/// The previous disposition of each of [`SIGNALS`]: what kind, and the handler's address.
const DEFAULT: usize = 0;
const IGNORE: usize = 1;
const HANDLER: usize = 2;
const SIGINFO_HANDLER: usize = 3;
static OLD_KIND: [AtomicUsize; 2] = [AtomicUsize::new(DEFAULT), AtomicUsize::new(DEFAULT)];
static OLD_FN: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// The process that installed the handlers.
static PID: AtomicU32 = AtomicU32::new(0);
/// The pipe's write end, or -1.
static PIPE_W: AtomicI32 = AtomicI32::new(-1);
/// A signal is being handled: the next one kills at once.
static FINISHING: AtomicBool = AtomicBool::new(false);
/// What ends the run (an `extern "C" fn()`: finish the recorder, log the summary); 0: none.
static FINISH: AtomicUsize = AtomicUsize::new(0);
/// The signal thread's finish is done (or gave up): an exit hook that finds one under way waits
/// for this, or the process would exit with the files half written.
static FINISHED: (std::sync::Mutex<bool>, std::sync::Condvar) =
    (std::sync::Mutex::new(false), std::sync::Condvar::new());
/// The functions registered with [`at_exit`] (run by [`exit_hook`]).
static EXIT_FNS: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

fn index(sig: libc::c_int) -> Option<usize> {
    SIGNALS.iter().position(|&s| s == sig)
}

/// Restores the default disposition of `sig` and sends it to the process (async-signal-safe).
fn die_of(sig: libc::c_int) {
    // SAFETY: sigaction/sigemptyset on a zeroed local struct and kill(getpid()) are
    // async-signal-safe and touch no shared memory.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut dfl.sa_mask);
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), sig);
    }
}

/// The handler of SIGTERM and SIGINT. Async-signal-safe: atomics, write(2), sigaction(2),
/// kill(2), and the previous handler (which the program installed as a signal handler).
extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let Some(i) = index(sig) else { return };
    let kind = OLD_KIND[i].load(Relaxed);
    let f = OLD_FN[i].load(Relaxed);
    match kind {
        IGNORE => {}
        HANDLER => {
            // SAFETY: `f` is the handler the program had installed for `sig` (a plain one).
            let h: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(f) };
            h(sig);
        }
        SIGINFO_HANDLER => {
            // SAFETY: `f` is the SA_SIGINFO handler the program had installed for `sig`; it
            // gets the arguments the kernel gave us.
            let h: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(f) };
            h(sig, info, ctx);
        }
        _ => {
            // The default: the process dies of it, once the files are finished.
            // SAFETY: getpid(2) is async-signal-safe.
            let ours = unsafe { libc::getpid() } as u32 == PID.load(Relaxed);
            let fd = PIPE_W.load(Relaxed);
            if !ours || fd < 0 || FINISHING.swap(true, AcqRel) {
                die_of(sig);
                return;
            }
            let b = sig as u8;
            // SAFETY: write(2) of one byte from a local into our non-blocking pipe.
            if unsafe { libc::write(fd, (&b as *const u8).cast(), 1) } != 1 {
                die_of(sig);
            }
        }
    }
}

/// The signal thread: waits for a signal number from the handler, finishes the run (at most
/// [`FINISH_WAIT`]), then lets the signal kill the process.
fn signal_thread(fd: libc::c_int) {
    // Signals go to the program's threads, never to this one (it must stay free to finish).
    // SAFETY: a local signal set; pthread_sigmask affects only this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in SIGNALS {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
    loop {
        let mut b = 0u8;
        // SAFETY: read(2) of one byte into a local.
        let n = unsafe { libc::read(fd, (&mut b as *mut u8).cast(), 1) };
        if n != 1 {
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        let sig = b as libc::c_int;
        let f = FINISH.load(Acquire);
        if let Some(r) = crate::session::recorder() {
            // Capture off; records being built are ended (their calls return) before the files
            // are finished.
            r.quiesce(QUIESCE_WAIT);
        }
        if f != 0 {
            let (tx, rx) = std::sync::mpsc::channel();
            let finisher = std::thread::Builder::new().name("msprobe-finish".into()).spawn(move || {
                // SAFETY: FINISH holds an `extern "C" fn()` set by `install`.
                let finish: extern "C" fn() = unsafe { std::mem::transmute(f) };
                finish();
                let _ = tx.send(());
            });
            if finisher.is_ok() && rx.recv_timeout(FINISH_WAIT).is_err() {
                log::error!(
                    "the dump was not finished within {} s of signal {sig}; the process ends now (run `msprobe recover` on the dump path)",
                    FINISH_WAIT.as_secs()
                );
            }
        }
        *FINISHED.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
        FINISHED.1.notify_all();
        die_of(sig);
        // The signal is pending for another thread of the process; it dies of it.
        std::thread::sleep(Duration::from_secs(60));
    }
}

/// Installs the SIGTERM and SIGINT handlers (once per process) and sets what ends the run on
/// them (`finish`: the last one given).
pub(crate) fn install(finish: extern "C" fn()) {
    FINISH.store(finish as usize, Release);
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let mut fds = [-1; 2];
        // SAFETY: pipe2 fills our local array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            log::warn!(
                "cannot create the signal pipe: SIGTERM/SIGINT will not finish the dump (the journal still holds it)"
            );
            return;
        }
        // The reading end blocks: only the write end must never block (the handler).
        // SAFETY: fcntl on the descriptor we just created.
        unsafe { libc::fcntl(fds[0], libc::F_SETFL, 0) };
        let r = fds[0];
        if std::thread::Builder::new().name("msprobe-signal".into()).spawn(move || signal_thread(r)).is_err() {
            log::warn!("cannot start the signal thread: SIGTERM/SIGINT will not finish the dump");
            return;
        }
        PIPE_W.store(fds[1], Relaxed);
        PID.store(std::process::id(), Relaxed);
        for (i, sig) in SIGNALS.into_iter().enumerate() {
            // SAFETY: sigaction with zeroed local structs; `handler` is async-signal-safe (see
            // its docs). The previous disposition is recorded before ours is in place.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                    continue;
                }
                let kind = match old.sa_sigaction {
                    libc::SIG_DFL => DEFAULT,
                    libc::SIG_IGN => IGNORE,
                    _ if old.sa_flags & libc::SA_SIGINFO != 0 => SIGINFO_HANDLER,
                    _ => HANDLER,
                };
                if kind == IGNORE {
                    // An ignored signal does not end the process: nothing to do for it.
                    continue;
                }
                OLD_FN[i].store(old.sa_sigaction, Relaxed);
                OLD_KIND[i].store(kind, Relaxed);
                let mut new: libc::sigaction = std::mem::zeroed();
                new.sa_sigaction = handler as *const () as usize;
                new.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK;
                libc::sigemptyset(&mut new.sa_mask);
                libc::sigaction(sig, &new, std::ptr::null_mut());
            }
        }
    });
}

/// Registers `f` to run at process exit: `atexit`, and `Py_AtExit` when the process is a
/// Python interpreter (its functions run at the end of finalization on every exit path, an
/// uncaught KeyboardInterrupt included, which skips `atexit`). `f` must be idempotent. An exit
/// while a signal's finish is under way waits for it first (at most [`FINISH_WAIT`]).
pub(crate) fn at_exit(f: extern "C" fn()) {
    static REGISTER: Once = Once::new();
    if !EXIT_FNS.iter().any(|slot| slot.compare_exchange(0, f as usize, AcqRel, Relaxed).is_ok()) {
        log::warn!("too many exit hooks; one is not registered");
    }
    REGISTER.call_once(|| {
        // SAFETY: registering a plain extern "C" fn that never unwinds.
        unsafe { libc::atexit(exit_hook) };
        // SAFETY: the real dlsym (never our own hook) with a static NUL-terminated name;
        // RTLD_DEFAULT searches the process.
        let sym = unsafe { crate::hook::real_dlsym()(libc::RTLD_DEFAULT, c"Py_AtExit".as_ptr()) };
        if !sym.is_null() {
            // SAFETY: CPython's `int Py_AtExit(void (*func)(void))`; it only records the pointer.
            let py_at_exit: extern "C" fn(extern "C" fn()) -> libc::c_int = unsafe { std::mem::transmute(sym) };
            py_at_exit(exit_hook);
        }
    });
}

/// Runs the registered exit functions, after any signal's finish under way.
extern "C" fn exit_hook() {
    let _ = std::panic::catch_unwind(|| {
        if FINISHING.load(Acquire) && PID.load(Relaxed) == std::process::id() {
            let done = FINISHED.0.lock().unwrap_or_else(|e| e.into_inner());
            drop(FINISHED.1.wait_timeout_while(done, FINISH_WAIT, |d| !*d));
        }
        for slot in &EXIT_FNS {
            let f = slot.load(Acquire);
            if f != 0 {
                // SAFETY: the slot holds an `extern "C" fn()` given to `at_exit`.
                let f: extern "C" fn() = unsafe { std::mem::transmute(f) };
                f();
            }
        }
    });
}
