//! Progress of a long wait for the writer (a `stop()` or flush that drains a large tensor dump).
//!
//! A caller waiting for the files ([`Writer::sync`](super::Writer::sync),
//! [`Writer::write_now`](super::Writer::write_now)) ticks a [`DrainProgress`] as it goes. Nothing
//! is shown unless the wait lasts longer than `MSPROBE_PROGRESS_DELAY_MS` (default 1000 ms) and
//! tensor bytes were queued when it began; then, as `msprobe recover` does: a bar on stderr when
//! stderr is a terminal, or, with `MSPROBE_PROGRESS=1` and stderr not a terminal, a log line at
//! most once a second; `MSPROBE_PROGRESS=0` never shows any. Only waiting callers tick it: the
//! capture path never does.
//!
//! Done is the queued tensor bytes (the [`Budget`]'s bytes in flight when the wait began) that
//! have since been written and released.

use crate::budget::Budget;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How progress is shown, from the environment (read once).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// `MSPROBE_PROGRESS=0`.
    Never,
    /// Unset: a bar when stderr is a terminal, else nothing.
    Auto,
    /// `MSPROBE_PROGRESS=1`: a bar on a terminal, log lines otherwise.
    Asked,
}

struct Settings {
    mode: Mode,
    delay: Duration,
}

fn settings() -> &'static Settings {
    static S: OnceLock<Settings> = OnceLock::new();
    S.get_or_init(|| {
        let mode = match std::env::var("MSPROBE_PROGRESS").ok().as_deref().map(str::trim) {
            None | Some("") => Mode::Auto,
            Some("0") => Mode::Never,
            Some("1") => Mode::Asked,
            Some(v) => {
                log::warn!(
                    "environment variable MSPROBE_PROGRESS has value {:?}; expected 0 or 1: progress is shown only on a terminal",
                    crate::config::clip_text(v)
                );
                Mode::Auto
            }
        };
        let delay = match std::env::var("MSPROBE_PROGRESS_DELAY_MS").ok().as_deref().map(str::trim) {
            None | Some("") => Duration::from_millis(1000),
            Some(v) => match v.parse::<u64>() {
                Ok(ms) => Duration::from_millis(ms),
                Err(_) => {
                    log::warn!(
                        "environment variable MSPROBE_PROGRESS_DELAY_MS has value {:?}; expected milliseconds: using 1000",
                        crate::config::clip_text(v)
                    );
                    Duration::from_millis(1000)
                }
            },
        };
        Settings { mode, delay }
    })
}

/// What is being shown.
enum Display {
    Bar(indicatif::ProgressBar),
    Log { last: Instant },
}

/// The progress of one wait; see the module docs.
pub(super) struct DrainProgress<'a> {
    budget: &'a Budget,
    start: Instant,
    total: u64,
    display: Option<Display>,
    /// No more checks: nothing to show (nothing queued, or not wanted).
    off: bool,
}

impl<'a> DrainProgress<'a> {
    pub(super) fn new(budget: &'a Budget) -> DrainProgress<'a> {
        let total = budget.in_flight();
        let off = total == 0 || settings().mode == Mode::Never;
        DrainProgress { budget, start: Instant::now(), total, display: None, off }
    }

    fn done(&self) -> u64 {
        self.total.saturating_sub(self.budget.in_flight())
    }

    /// Called by the waiting caller after each piece of work and while it waits.
    pub(super) fn tick(&mut self) {
        if self.off {
            return;
        }
        let s = settings();
        if self.display.is_none() {
            if self.start.elapsed() < s.delay {
                return;
            }
            let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
            self.display = match (terminal, s.mode) {
                (true, _) => {
                    let b = indicatif::ProgressBar::new(self.total);
                    b.set_style(
                        indicatif::ProgressStyle::with_template(
                            "msprobe stop(): writing tensor files {bar:40} {bytes}/{total_bytes} ({eta})",
                        )
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                    );
                    Some(Display::Bar(b))
                }
                (false, Mode::Asked) => {
                    self.log_line();
                    Some(Display::Log { last: Instant::now() })
                }
                _ => {
                    self.off = true;
                    return;
                }
            };
        }
        let done = self.done();
        match &mut self.display {
            Some(Display::Bar(b)) => b.set_position(done),
            Some(Display::Log { last }) if last.elapsed() >= Duration::from_secs(1) => {
                *last = Instant::now();
                self.log_line();
            }
            _ => {}
        }
    }

    fn log_line(&self) {
        let done = self.done();
        log::info!(
            "waiting for the writer: {} of {} queued tensor bytes written ({}%), {:.1} s",
            done,
            self.total,
            done * 100 / self.total.max(1),
            self.start.elapsed().as_secs_f64()
        );
    }

    /// The wait is over: the bar is cleared, or a last line says how long it took.
    pub(super) fn finish(self) {
        match self.display {
            Some(Display::Bar(b)) => b.finish_and_clear(),
            Some(Display::Log { .. }) => log::info!(
                "the writer has written the {} queued tensor bytes in {:.1} s",
                self.total,
                self.start.elapsed().as_secs_f64()
            ),
            None => {}
        }
    }
}
