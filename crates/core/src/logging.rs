//! The `log` backend: msprobe's line format on stderr, level from `MSPROBE_LOG_LEVEL`.
//!
//! `MSPROBE_LOG_LEVEL` takes msprobe's numbers (0 debug, 1 info — the default, 2 warning,
//! 3 error, 4 silent) or the names debug/info/warn/error/off. Lines look like msprobe's:
//! `2026-12-02 10:00:00 (1234) [msprobe] [INFO] msg` (`[msprobe] [rank 3] [INFO]` once the rank is
//! known), with control characters other than newlines
//! replaced by `_`.

use log::{Level, LevelFilter, Log, Metadata, Record};

struct Logger;

/// The local UTC offset, read once when the logger is installed: reading the time zone at each
/// line would touch chrono's thread-local cache, which is gone when the run summary is logged
/// from an exit handler. A daylight-saving change during a run shifts later lines by an hour.
static OFFSET: std::sync::OnceLock<chrono::FixedOffset> = std::sync::OnceLock::new();

fn now_local() -> String {
    let offset =
        OFFSET.get().copied().unwrap_or_else(|| chrono::FixedOffset::east_opt(0).expect("0 is a valid offset"));
    chrono::Utc::now().with_timezone(&offset).format("%Y-%m-%d %H:%M:%S").to_string()
}

impl Log for Logger {
    fn enabled(&self, m: &Metadata) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &Record) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let level = match r.level() {
            Level::Error => "ERROR",
            Level::Warn => "WARNING",
            Level::Info => "INFO",
            Level::Debug | Level::Trace => "DEBUG",
        };
        // Control characters are replaced (log injection); newlines of our own multi-line blocks
        // (the run summary) are kept.
        let msg: String =
            r.args().to_string().chars().map(|c| if c.is_control() && c != '\n' { '_' } else { c }).collect();
        // Never panic (eprintln! would on EPIPE): a lost log line must not abort the host job.
        let rank = RANK.load(std::sync::atomic::Ordering::Relaxed);
        let line = if rank < 0 {
            format!("{} ({}) [msprobe] [{level}] {msg}\n", now_local(), std::process::id())
        } else {
            format!("{} ({}) [msprobe] [rank {rank}] [{level}] {msg}\n", now_local(), std::process::id())
        };
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
    }

    fn flush(&self) {}
}

/// The process's rank once known (-1 before): lines of a multi-rank job say whose they are.
static RANK: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(-1);

/// Adds `[rank R]` to every later line (the recorder calls it when it learns its rank).
pub fn set_rank(rank: u64) {
    RANK.store(i64::try_from(rank).unwrap_or(i64::MAX), std::sync::atomic::Ordering::Relaxed);
}

/// The rank log lines carry, once known (the Python layers' logger asks for it, so that their
/// lines match these).
pub fn rank() -> Option<u64> {
    u64::try_from(RANK.load(std::sync::atomic::Ordering::Relaxed)).ok()
}

/// Parses `MSPROBE_LOG_LEVEL`.
pub fn level_from(v: Option<&str>) -> LevelFilter {
    parse_level(v).unwrap_or(LevelFilter::Info)
}

/// `MSPROBE_LOG_LEVEL`'s level; None for a value that names none (unset or empty is info).
fn parse_level(v: Option<&str>) -> Option<LevelFilter> {
    Some(match v.map(|s| s.trim().to_ascii_lowercase()).as_deref() {
        Some("0") | Some("debug") => LevelFilter::Debug,
        Some("2") | Some("warn") | Some("warning") => LevelFilter::Warn,
        Some("3") | Some("error") => LevelFilter::Error,
        Some("4") | Some("off") => LevelFilter::Off,
        Some("trace") => LevelFilter::Trace,
        None | Some("") | Some("1") | Some("info") => LevelFilter::Info,
        Some(_) => return None,
    })
}

/// Installs the logger once (a no-op if the host already installed a `log` backend).
pub fn init() {
    static LOGGER: Logger = Logger;
    OFFSET.get_or_init(|| *chrono::Local::now().offset());
    if log::set_logger(&LOGGER).is_ok() {
        let raw = std::env::var("MSPROBE_LOG_LEVEL").ok();
        log::set_max_level(level_from(raw.as_deref()));
        if parse_level(raw.as_deref()).is_none() {
            log::warn!(
                "environment variable MSPROBE_LOG_LEVEL has value {:?}; expected 0-4 or debug, info, warn, error, \
                 off: using 1 (info)",
                raw.unwrap_or_default()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn levels() {
        use log::LevelFilter::*;
        assert_eq!(super::level_from(None), Info);
        assert_eq!(super::level_from(Some("0")), Debug);
        assert_eq!(super::level_from(Some("4")), Off);
        assert_eq!(super::level_from(Some("WARNING")), Warn);
    }
}
