//! The persistent compilation cache across processes: a second process
//! loads what the first compiled, damaged entries are recompiled with a
//! warning, and processes writing the same entries at once leave valid
//! files. Each process is this test binary run again on
//! `one_process_s_steps` (ignored unless asked for), on the plugin the
//! tests use (CI runs it on both CPU plugins).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The work of one process: a few programs, their values checked; prints
/// the counters.
#[test]
#[ignore = "run by the other tests of this file, as a process of its own"]
fn one_process_s_steps() {
    let Ok(dir) = std::env::var("LAZYXLA_TEST_CACHE_DIR") else {
        panic!("run by the other tests of this file, with LAZYXLA_TEST_CACHE_DIR set");
    };
    let device = common::pjrt_device().expect("a plugin");
    lazyxla::set_compilation_cache_dir(&dir).unwrap();
    device.scoped(|| {
        let x = lazyxla::Tensor::from_vec(vec![1.0f32, -2.0, 3.0, 0.5], &[4]).unwrap();
        let a = (&x * 2.0).relu().sum();
        let m = x.masked_select(&x.gt_scalar(0.0));
        let b = (&m * &m).sum();
        let c = x.reshape(&[2, 2]).matmul(&x.reshape(&[2, 2])).sum();
        assert_eq!(a.item::<f32>().unwrap(), 9.0);
        assert_eq!(b.item::<f32>().unwrap(), 10.25);
        assert_eq!(c.item::<f32>().unwrap(), -9.25);
    });
    let counter = lazyxla::metrics::counter;
    println!(
        "COUNTS hit={} miss={}",
        counter("PersistentCacheHit"),
        counter("PersistentCacheMiss")
    );
}

/// Runs [`one_process_s_steps`] in a process of its own on `dir`; its
/// output after it exits.
fn spawn(dir: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "one_process_s_steps", "--nocapture"])
        .env("LAZYXLA_TEST_CACHE_DIR", dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// The (hit, miss) counts a finished process printed, and its stderr.
fn counts(out: Output) -> ((u64, u64), String) {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success(),
        "the process failed:\n{stdout}\n{stderr}"
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("COUNTS"))
        .unwrap_or_else(|| panic!("no counts in:\n{stdout}"));
    let n = |k: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .and_then(|v| v.parse().ok())
            .unwrap()
    };
    ((n("hit="), n("miss=")), stderr)
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lazyxla-cache-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

#[test]
fn a_second_process_loads_what_the_first_compiled() {
    if common::pjrt_device().is_none() {
        return;
    }
    let dir = fresh_dir("second");
    let ((hit, miss), _) = counts(spawn(&dir).wait_with_output().unwrap());
    assert_eq!(hit, 0);
    assert!(miss >= 3, "{miss} programs compiled");
    let written = entries(&dir);
    assert_eq!(
        written.len() as u64,
        miss,
        "one entry per program: {written:?}"
    );
    let ((hit2, miss2), _) = counts(spawn(&dir).wait_with_output().unwrap());
    assert_eq!(
        (hit2, miss2),
        (miss, 0),
        "the second process compiles nothing"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn damaged_or_foreign_entries_are_compiled_again_with_a_warning() {
    if common::pjrt_device().is_none() {
        return;
    }
    let dir = fresh_dir("damaged");
    let ((_, miss), _) = counts(spawn(&dir).wait_with_output().unwrap());
    let files = entries(&dir);
    // One truncated, one overwritten with garbage, one whose payload was
    // flipped (its checksum no longer matches).
    let whole = std::fs::read(&files[0]).unwrap();
    std::fs::write(&files[0], &whole[..whole.len() / 2]).unwrap();
    std::fs::write(&files[1], b"not a cache entry at all").unwrap();
    let mut flipped = std::fs::read(&files[2]).unwrap();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x55;
    std::fs::write(&files[2], flipped).unwrap();
    let ((hit, miss2), stderr) = counts(spawn(&dir).wait_with_output().unwrap());
    assert_eq!((hit, miss2), (miss - 3, 3), "{stderr}");
    for (file, why) in [
        (&files[0], "truncated"),
        (&files[1], "not a lazyxla compilation cache file"),
        (&files[2], "checksum"),
    ] {
        let line = stderr
            .lines()
            .find(|l| l.contains(&file.display().to_string()))
            .unwrap_or_else(|| panic!("no warning for {}:\n{stderr}", file.display()));
        assert!(
            line.contains(why) && line.contains("compiling the program again"),
            "{line}"
        );
    }
    // The entries were written again: a fourth process compiles nothing.
    let ((hit, miss3), _) = counts(spawn(&dir).wait_with_output().unwrap());
    assert_eq!((hit, miss3), (miss, 0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn processes_that_write_the_same_entries_at_once_leave_valid_files() {
    if common::pjrt_device().is_none() {
        return;
    }
    let dir = fresh_dir("concurrent");
    let children: Vec<_> = (0..3).map(|_| spawn(&dir)).collect();
    for c in children {
        counts(c.wait_with_output().unwrap());
    }
    let files = entries(&dir);
    assert!(
        files
            .iter()
            .all(|f| f.extension().is_some_and(|e| e == "xla")),
        "no temporary file is left: {files:?}"
    );
    let ((hit, miss), stderr) = counts(spawn(&dir).wait_with_output().unwrap());
    assert_eq!((hit, miss), (files.len() as u64, 0), "{stderr}");
    assert!(!stderr.contains("is not used"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
