//! The persistent compilation cache: executables XLA compiled, kept on disk
//! so that a second process (a script restarted, another run of a test)
//! loads them instead of compiling, as JAX's `jax_compilation_cache_dir`
//! and PyTorch/XLA's `xr.initialize_cache` do.
//!
//! Off until [`set_compilation_cache_dir`] or `LAZYXLA_CACHE_DIR` names a
//! directory. An entry is keyed by everything that decides the compiled
//! code: the StableHLO text, the compile options, and the plugin (its file,
//! size and modification time, and its C API version) with its platform
//! and device count. The file name is a 64-bit hash of that key; the file
//! holds the key itself, compared in full when read, so a hash collision is
//! a miss, never a wrong program. A file that is truncated, corrupt, from
//! another plugin or another format is ignored with one warning and
//! replaced by a fresh compile: the cache can only cost a compile, never a
//! crash (the plugin itself refuses bytes it did not write: see
//! `tests/pjrt_ffi.rs`). Entries are written to a temporary name in the
//! directory and renamed into place, so processes that compile the same
//! program at once each write a whole file and readers never see half of
//! one. Counted by `PersistentCacheHit` and `PersistentCacheMiss`.

use super::ffi::{Client, Executable, PjrtError};
use crate::error::{Error, Result};
use crate::metrics;
use parking_lot::RwLock;
use std::hash::Hasher;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The first bytes of every entry; the version after it changes with the
/// file layout.
const MAGIC: &[u8; 16] = b"lazyxla-xla-exe\n";
const VERSION: u32 = 1;

static DIR: RwLock<Option<PathBuf>> = RwLock::new(None);
static FROM_ENV: OnceLock<()> = OnceLock::new();

/// Keeps compiled XLA programs in `dir` (created if needed) from now on,
/// and loads them from there instead of compiling: a script started again
/// compiles nothing it compiled before (`LAZYXLA_CACHE_DIR` does the same
/// from outside). Entries are specific to the plugin that wrote them; a
/// damaged or foreign file is recompiled with a warning. The reference
/// backend compiles nothing and is unaffected.
///
/// ```
/// let dir = std::env::temp_dir().join("lazyxla-doc-cache");
/// lazyxla::set_compilation_cache_dir(&dir).unwrap();
/// assert_eq!(lazyxla::compilation_cache_dir(), Some(dir));
/// ```
pub fn set_compilation_cache_dir(dir: impl AsRef<Path>) -> Result<()> {
    let dir = dir.as_ref();
    std::fs::create_dir_all(dir).map_err(|e| Error::Io {
        op: "set_compilation_cache_dir",
        path: dir.display().to_string(),
        message: format!(
            "{e}: the directory of the compilation cache must be creatable and writable"
        ),
    })?;
    FROM_ENV.get_or_init(|| ());
    *DIR.write() = Some(dir.to_path_buf());
    Ok(())
}

/// The directory of the persistent compilation cache, if one is set.
///
/// ```
/// if let Some(dir) = lazyxla::compilation_cache_dir() {
///     println!("compiled programs are kept in {}", dir.display());
/// }
/// ```
pub fn compilation_cache_dir() -> Option<PathBuf> {
    FROM_ENV.get_or_init(|| {
        if let Some(d) = std::env::var_os("LAZYXLA_CACHE_DIR").filter(|d| !d.is_empty()) {
            match std::fs::create_dir_all(&d) {
                Ok(()) => *DIR.write() = Some(PathBuf::from(d)),
                Err(e) => eprintln!(
                    "lazyxla: LAZYXLA_CACHE_DIR={} is not usable ({e}); compiling without a persistent cache",
                    PathBuf::from(d).display()
                ),
            }
        }
    });
    DIR.read().clone()
}

/// What identifies the compiled code of `client`'s plugin.
fn plugin_id(client: &Client) -> String {
    let plugin = client.plugin();
    let path = plugin.path();
    let (len, modified) = std::fs::metadata(path)
        .map(|m| {
            let t = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            (m.len(), t)
        })
        .unwrap_or((0, 0));
    let (major, minor) = plugin.api_version();
    format!(
        "plugin {} {len} {modified} api {major}.{minor} platform {} devices {}",
        path.display(),
        client.platform_name(),
        client.device_count()
    )
}

fn hash(parts: &[&[u8]]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    for p in parts {
        h.write_usize(p.len());
        h.write(p);
    }
    h.finish()
}

/// Compiles `text` with the encoded `options` on `client` through the
/// cache when a directory is set: loaded from its entry if there is a
/// valid one, else compiled by `compile` and stored.
pub(super) fn compile(
    client: &Client,
    text: &str,
    options: &[u8],
    compile: impl FnOnce() -> std::result::Result<Executable, PjrtError>,
) -> std::result::Result<Executable, PjrtError> {
    let Some(dir) = compilation_cache_dir() else {
        return compile();
    };
    let id = plugin_id(client);
    let key: [&[u8]; 3] = [id.as_bytes(), options, text.as_bytes()];
    let path = dir.join(format!("{:016x}.xla", hash(&key)));
    match read(&path, &key) {
        Ok(Some(payload)) => match client.deserialize(&payload) {
            Ok(exe) => {
                metrics::inc(metrics::Counter::PersistentCacheHit);
                return Ok(exe);
            }
            Err(e) => warn(
                &path,
                &format!("the plugin could not load it ({})", e.message),
            ),
        },
        Ok(None) => {}
        Err(why) => warn(&path, &why),
    }
    metrics::inc(metrics::Counter::PersistentCacheMiss);
    let exe = compile()?;
    match exe.serialize() {
        Ok(payload) => {
            if let Err(e) = write(&path, &key, &payload) {
                warn(&path, &format!("it could not be written ({e})"));
            }
        }
        Err(e) => warn(
            &path,
            &format!("the plugin cannot serialize its programs ({})", e.message),
        ),
    }
    Ok(exe)
}

/// Warns, once per file, that the cache entry at `path` is not used.
fn warn(path: &Path, why: &str) {
    static WARNED: parking_lot::Mutex<Vec<PathBuf>> = parking_lot::Mutex::new(Vec::new());
    let mut warned = WARNED.lock();
    if warned.iter().any(|p| p == path) {
        return;
    }
    warned.push(path.to_path_buf());
    eprintln!(
        "lazyxla: the compilation cache entry {} is not used: {why}; compiling the program again",
        path.display()
    );
}

/// The executable bytes of the entry at `path` if it holds `key`;
/// `None` when there is no entry (or another key's, a hash collision);
/// an error saying what is wrong with a damaged one.
fn read(path: &Path, key: &[&[u8]]) -> std::result::Result<Option<Vec<u8>>, String> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("it could not be read ({e})")),
    };
    let mut at = 0usize;
    let mut take = |n: usize| -> std::result::Result<&[u8], String> {
        let end = at.checked_add(n).filter(|&e| e <= bytes.len());
        let Some(end) = end else {
            return Err(format!("it is truncated ({} bytes)", bytes.len()));
        };
        let s = &bytes[at..end];
        at = end;
        Ok(s)
    };
    if take(MAGIC.len())? != MAGIC {
        return Err("it is not a lazyxla compilation cache file".into());
    }
    let version = u32::from_le_bytes(take(4)?.try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(format!(
            "it has format version {version}, this lazyxla writes {VERSION}"
        ));
    }
    let mut parts: Vec<&[u8]> = Vec::with_capacity(key.len() + 1);
    for _ in 0..=key.len() {
        let n = u64::from_le_bytes(take(8)?.try_into().expect("8 bytes"));
        let n = usize::try_from(n).map_err(|_| "a length that does not fit memory".to_string())?;
        parts.push(take(n)?);
    }
    let sum = u64::from_le_bytes(take(8)?.try_into().expect("8 bytes"));
    if at != bytes.len() {
        return Err("it has bytes after its end".into());
    }
    if hash(&parts) != sum {
        return Err("its checksum does not match (a damaged file)".into());
    }
    if parts[..key.len()] != *key {
        return Ok(None);
    }
    Ok(Some(parts[key.len()].to_vec()))
}

/// Writes the entry at `path`: to a temporary name in the directory, then
/// renamed into place (atomic on one file system).
fn write(path: &Path, key: &[&[u8]], payload: &[u8]) -> std::io::Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut parts: Vec<&[u8]> = key.to_vec();
    parts.push(payload);
    let mut out = Vec::with_capacity(payload.len() + 1024);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    for p in &parts {
        out.extend_from_slice(&(p.len() as u64).to_le_bytes());
        out.extend_from_slice(p);
    }
    out.extend_from_slice(&hash(&parts).to_le_bytes());
    let tmp = path.with_extension(format!(
        "tmp-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(&out)?;
        f.sync_all()
    });
    match written.and_then(|()| std::fs::rename(&tmp, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_reads_back_and_every_damage_is_named() {
        let dir = std::env::temp_dir().join(format!("lazyxla-cache-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("entry.xla");
        let key: [&[u8]; 3] = [b"plugin", b"options", b"program text"];
        write(&path, &key, b"compiled").unwrap();
        assert_eq!(
            read(&path, &key).unwrap().as_deref(),
            Some(&b"compiled"[..])
        );
        // Another key in the same file (a collision): a miss.
        let other: [&[u8]; 3] = [b"plugin", b"options", b"another program"];
        assert_eq!(read(&path, &other).unwrap(), None);
        let whole = std::fs::read(&path).unwrap();
        let damaged = |bytes: &[u8]| {
            std::fs::write(&path, bytes).unwrap();
            read(&path, &key).unwrap_err()
        };
        assert!(damaged(&whole[..whole.len() - 3]).contains("truncated"));
        let mut flipped = whole.clone();
        let n = flipped.len();
        flipped[n - 12] ^= 1;
        assert!(damaged(&flipped).contains("checksum"));
        assert!(damaged(b"PK\x03\x04 a zip file, say").contains("not a lazyxla"));
        assert!(damaged(&[]).contains("truncated"));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(read(&path, &key).unwrap(), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
