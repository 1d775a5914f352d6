//! The bounded LRU cache of compiled programs.

use crate::backend::ExecutableRef;
use lru::LruCache;
use parking_lot::Mutex;
use std::num::NonZeroUsize;
use std::sync::LazyLock;

/// Key: the program's canonical encoding followed by the device's
/// identity (see [`with_device`]); looked up by reference, so a hit copies
/// no key.
type Key = Vec<u8>;

type Cache = LruCache<Key, ExecutableRef, rustc_hash::FxBuildHasher>;

static CACHE: LazyLock<Mutex<Cache>> =
    LazyLock::new(|| Mutex::new(LruCache::with_hasher(cap(), rustc_hash::FxBuildHasher)));

/// The capacity: `LAZYXLA_CACHE_SIZE`, default 256.
fn cap() -> NonZeroUsize {
    std::env::var("LAZYXLA_CACHE_SIZE")
        .ok()
        .and_then(|v| v.parse().ok())
        .and_then(NonZeroUsize::new)
        .unwrap_or(NonZeroUsize::new(256).expect("nonzero"))
}

/// Appends `device`'s identity to a program's key, making it the key of
/// that program on that device.
pub(crate) fn with_device(key: &mut Vec<u8>, device: usize) {
    key.extend_from_slice(&device.to_ne_bytes());
}

pub(crate) fn get(key: &[u8]) -> Option<ExecutableRef> {
    CACHE.lock().get(key).cloned()
}

pub(crate) fn put(key: Key, exe: ExecutableRef) {
    let mut c = CACHE.lock();
    let full = c.len() == c.cap().get() && !c.contains(&key[..]);
    let out = c.push(key, exe);
    drop(c);
    if let (true, Some((old, _))) = (full, out) {
        crate::metrics::inc(crate::metrics::Counter::CompileCacheEviction);
        super::diagnose::evicted(&old);
    }
}

/// Sets how many compiled programs the cache holds (default 256,
/// `LAZYXLA_CACHE_SIZE`); the least recently used go first.
pub(crate) fn set_capacity(n: usize) {
    if let Some(n) = NonZeroUsize::new(n) {
        CACHE.lock().resize(n);
    }
}

/// Forgets every compiled program (not an eviction).
pub(crate) fn clear() {
    let old = std::mem::replace(
        &mut *CACHE.lock(),
        LruCache::with_hasher(cap(), rustc_hash::FxBuildHasher),
    );
    drop(old);
}

/// Number of compiled programs held.
pub(crate) fn len() -> usize {
    CACHE.lock().len()
}
