use super::*;
use msprobe_core::header::Header;
use std::os::unix::fs::MetadataExt;

fn id(root: &Path) -> Identity {
    let h = Header { task: "statistics".into(), level: "L1".into(), dump_data_dir: None };
    Identity::of_this_process(root, &h)
}

fn sink(root: &Path, sync: SyncPolicy) -> MmapSink {
    let (file, path, base) = journal::create_file(root, &id(root)).unwrap();
    MmapSink::map(file, path, base, sync).map_err(|(_, e)| e).unwrap()
}

fn rec(i: usize, pad: usize) -> Vec<u8> {
    let mut e = Vec::new();
    let text = format!("{{\"i\": {i}, \"pad\": \"{}\"}}", "x".repeat(pad));
    journal::entry(&mut e, 'R', "step0/rank", &format!("Torch.add.{i}.forward"), &text);
    e
}

fn names(path: &Path) -> Vec<String> {
    let r = journal::read(path).unwrap();
    assert_eq!((r.torn, r.damaged), (0, 0), "{} entries", r.entries.len());
    r.entries.into_iter().map(|e| e.name).collect()
}

/// Entries appended from many threads at once (past several allocation steps) are all in the
/// file, whole, each where its append said; the file is read while the mapping is live.
#[test]
fn concurrent_appends_are_all_in_the_file() {
    let t = tempfile::tempdir().unwrap();
    let s = Arc::new(sink(t.path(), SyncPolicy::None));
    let threads: Vec<_> = (0..4)
        .map(|k| {
            let s = s.clone();
            std::thread::spawn(move || {
                (0..3000).map(|i| (s.append(&rec(k * 10_000 + i, i % 700)), k * 10_000 + i)).collect::<Vec<_>>()
            })
        })
        .collect();
    let mut spans: Vec<_> = threads.into_iter().flat_map(|h| h.join().unwrap()).collect();
    spans.sort_by_key(|(a, _)| a.start);
    assert!(spans.iter().all(|(a, _)| a.ok));
    assert!(spans.windows(2).all(|w| w[0].0.end == w[1].0.start), "spans are contiguous and disjoint");
    assert_eq!(spans[0].0.start, s.base());
    assert!(spans.last().unwrap().0.end > s.base() + GROW_MIN, "the file grew");
    let want: Vec<String> = spans.iter().map(|(_, i)| format!("Torch.add.{i}.forward")).collect();
    assert_eq!(names(s.path()), want);
}

/// Space before what is still needed is given back (and skipped by readers); when nothing is
/// needed the journal starts over at the header, and its old entries are gone.
#[test]
fn space_is_given_back_and_the_journal_starts_over() {
    let t = tempfile::tempdir().unwrap();
    let s = sink(t.path(), SyncPolicy::Step);
    let spans: Vec<_> = (0..3000).map(|i| s.append(&rec(i, 1000))).collect();
    let blocks = |p: &Path| std::fs::metadata(p).unwrap().blocks() * 512;
    let full = blocks(s.path());
    let keep_from = spans[2000].start;
    assert!(!s.release(keep_from));
    s.checkpoint();
    let got = names(s.path());
    assert_eq!(got.first().map(String::as_str), Some("Torch.add.2000.forward"), "the release mark is honoured");
    assert_eq!(got.len(), 1000);
    assert!(blocks(s.path()) < full - 1_500_000, "{} of {full} bytes still allocated", blocks(s.path()));
    assert!(s.release(spans.last().unwrap().end), "nothing needed: start over");
    assert!(names(s.path()).is_empty());
    let again = s.append(&rec(7, 10));
    assert_eq!((again.start, again.ok), (s.base(), true));
    assert_eq!(names(s.path()), ["Torch.add.7.forward"]);
    s.finish(false);
    assert!(!s.path().exists());
}

/// Entries are durable once `append` returns, whatever kills the process after: a child
/// process appends and SIGKILLs itself at once, with no flush, no unmap, no exit.
#[test]
fn appended_entries_survive_a_kill() {
    if let Ok(dir) = std::env::var("MMAP_JOURNAL_CHILD") {
        let s = sink(Path::new(&dir), SyncPolicy::None);
        for i in 0..20_000 {
            s.append(&rec(i, i % 300));
        }
        // SAFETY: raise(3) has no memory-safety preconditions.
        unsafe { libc::raise(libc::SIGKILL) };
        unreachable!();
    }
    let t = tempfile::tempdir().unwrap();
    let st = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "tests::appended_entries_survive_a_kill", "--nocapture"])
        .env("MMAP_JOURNAL_CHILD", t.path())
        .status()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(st.signal(), Some(libc::SIGKILL));
    let (j,) = {
        let mut js: Vec<_> = std::fs::read_dir(t.path()).unwrap().flatten().map(|e| e.path()).collect();
        assert_eq!(js.len(), 1);
        (js.pop().unwrap(),)
    };
    let got = names(&j);
    assert_eq!(got.len(), 20_000);
    assert!(got.iter().enumerate().all(|(i, n)| *n == format!("Torch.add.{i}.forward")));
}

#[test]
fn sync_policy_from_the_environment() {
    // Parsing only (the variable is read once per journal).
    assert_eq!(SyncPolicy::from_env(), SyncPolicy::None);
}

/// A long run whose space is given back as it goes keeps a bounded part of the file allocated,
/// however far its offsets go.
#[test]
fn a_long_run_keeps_little_allocated() {
    let t = tempfile::tempdir().unwrap();
    let s = sink(t.path(), SyncPolicy::None);
    let blocks = |p: &Path| std::fs::metadata(p).unwrap().blocks() * 512;
    let mut peak = 0;
    let mut last = s.append(&rec(0, 10));
    for i in 1..40_000 {
        last = s.append(&rec(i, 1000));
        if i % 500 == 0 {
            s.release(last.start);
            s.prepare();
            peak = peak.max(blocks(s.path()));
        }
    }
    assert!(last.end > 40 << 20, "offsets went past 40 MiB ({})", last.end);
    assert!(peak < 12 << 20, "at most {peak} bytes allocated at once");
}
