//! Why a program compiled, which reads ran programs, and graphs that grow
//! from program to program: the runtime's own account, kept as values
//! ([`compile_log`], the metrics report) and printed to stderr as it
//! happens with `LAZYXLA_DEBUG=1` (a summary at exit too).
//!
//! Every compile is attributed to its *sync site*: the user's call of
//! `mark_step`, of a read (`item`, `to_vec`, ..), of a size read or of a
//! captured step (the tensor layer says which, [`with_site`]). A site
//! keeps the last programs it compiled, and a new one is compared with
//! them node by node: the first node that differs (its op, its type, a
//! scalar's value) names the cause, with where each op was recorded
//! (`Node::location`).
//!
//! A compile compares its program with the last four its site compiled for
//! the device (op text, type, location; constants and their broadcasts set
//! aside for the op sequence): an input's type (and where it was made), a
//! scalar's value (and the line of the op that used it), the first op that
//! differs (both ops and lines), an evicted key, a captured step's new
//! signature. Locations are `&'static Location`s (no allocation); lines
//! inside lazyxla are skipped in favour of the user's (the scalar a `* 0.1`
//! shares, an op's internal broadcast).

mod cause;
mod growth;

pub(crate) use cause::is_ours;
pub use cause::{CompileCause, CompileEntry};
pub(crate) use growth::before_compile;
pub use growth::set_graph_limits;

use crate::ir::program::Program;
use cause::Summary;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::collections::VecDeque;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::panic::Location;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, Once};
use std::time::Duration;

/// Where a sync comes from: the public call and the user's line.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Site {
    /// The call: `mark_step`, `item`, `to_vec`, `materialize`, `capture`, ..
    pub kind: &'static str,
    /// The user's line.
    pub location: &'static Location<'static>,
}

impl Site {
    fn key(&self) -> SiteId {
        let l = self.location;
        (self.kind, l.file(), l.line(), l.column())
    }

    /// The key of the programs this site compiled for `device`.
    fn on(&self, device: usize) -> SiteKey {
        let l = self.location;
        (self.kind, l.file(), l.line(), l.column(), device)
    }
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {}", self.kind, at(self.location))
    }
}

thread_local! {
    static SITE: Cell<Option<Site>> = const { Cell::new(None) };
}

/// Runs `f` as the sync site `kind` at `location`, unless an outer call
/// already named the site (a read inside `mark_step`'s machinery stays
/// `mark_step`'s).
pub(crate) fn with_site<R>(
    kind: &'static str,
    location: &'static Location<'static>,
    f: impl FnOnce() -> R,
) -> R {
    if SITE.with(Cell::get).is_some() {
        return f();
    }
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            SITE.with(|s| s.set(None));
        }
    }
    SITE.with(|s| s.set(Some(Site { kind, location })));
    let _reset = Reset;
    f()
}

/// The site of the sync running on this thread, if one was named.
pub(crate) fn site() -> Option<Site> {
    SITE.with(Cell::get)
}

/// `file:line` of a location.
pub(crate) fn at(l: &Location<'_>) -> String {
    format!("{}:{}", l.file(), l.line())
}

/// A sync site: the call, its file, line and column.
type SiteId = (&'static str, &'static str, u32, u32);

/// Reads that ran programs at one site: the site, how many, and what the
/// last one computed.
type Forced = (Site, u64, String);

/// A sync site on one device.
type SiteKey = (&'static str, &'static str, u32, u32, usize);

/// What one site has compiled.
#[derive(Default)]
struct SiteLog {
    /// The last programs, newest last.
    recent: VecDeque<Summary>,
    /// Node count of the last program, and for how many programs in a
    /// row the count rose.
    last_nodes: usize,
    growing: usize,
    warned: bool,
}

#[derive(Default)]
struct State {
    sites: FxHashMap<SiteKey, SiteLog>,
    log: VecDeque<CompileEntry>,
    /// Hashes of keys the compile cache evicted.
    evicted: rustc_hash::FxHashSet<u64>,
    /// Reads that ran a program, by site: count and the last thing run.
    forced: FxHashMap<SiteId, Forced>,
    /// A captured step's reason for recording again, for its compile.
    recapture: Option<String>,
    /// Warnings given (growing graphs), oldest first.
    warnings: VecDeque<String>,
}

/// Gives a warning: kept for [`warnings`] and printed to stderr (always:
/// a warning is rare and says how to fix what would otherwise fail).
fn warn(st: &mut State, text: String) {
    if st.warnings.len() == LOG {
        st.warnings.pop_front();
    }
    st.warnings.push_back(text.clone());
    eprintln!("lazyxla: {text}");
}

/// The warnings given so far (a graph that grows from program to
/// program), oldest first.
///
/// ```
/// for w in lazyxla::debug::warnings() {
///     println!("{w}");
/// }
/// ```
pub fn warnings() -> Vec<String> {
    STATE.lock().warnings.iter().cloned().collect()
}

static STATE: LazyLock<Mutex<State>> = LazyLock::new(|| {
    install();
    Default::default()
});

/// Programs kept per site to compare against, and compile log entries.
const RECENT: usize = 4;
const LOG: usize = 1024;

/// True with `LAZYXLA_DEBUG=1`: every event is printed to stderr.
pub(crate) fn printing() -> bool {
    static ON: LazyLock<bool> =
        LazyLock::new(|| std::env::var("LAZYXLA_DEBUG").is_ok_and(|v| v != "0" && !v.is_empty()));
    *ON
}

fn print(text: impl fmt::Display) {
    if printing() {
        static SUMMARY: Once = Once::new();
        SUMMARY.call_once(|| {
            #[cfg(unix)]
            // SAFETY: `summary_at_exit` takes no arguments and unwinds
            // nothing (it prints and catches nothing that can panic).
            unsafe {
                libc::atexit(summary_at_exit);
            }
        });
        eprintln!("lazyxla: {text}");
    }
}

#[cfg(unix)]
extern "C" fn summary_at_exit() {
    // `try_lock`: a thread that exits the process may hold the lock.
    if let Some(st) = STATE.try_lock() {
        let text = summary_of(&st);
        eprint!("lazyxla: summary at exit\n{text}");
    }
}

/// The compiles so far (at most the last 1024), oldest first.
///
/// ```
/// use lazyxla::{debug, mark_step, Tensor};
/// let y = Tensor::from_vec(vec![1.0f32], &[1]).unwrap().exp();
/// mark_step().unwrap();
/// for entry in debug::compile_log() {
///     println!("{}: {:?}", entry.site, entry.cause);
/// }
/// drop(y);
/// ```
pub fn compile_log() -> Vec<CompileEntry> {
    STATE.lock().log.iter().cloned().collect()
}

/// Records a compile of `program` for `device` (`locations[i]`: where
/// node `i` was recorded; `key`: its cache key; `gradients`: how many
/// results are gradients kept alive) that took `time`, with its cause.
pub(crate) fn compiled(
    device: usize,
    program: &Program,
    locations: &[&'static Location<'static>],
    key: &[u8],
    time: Duration,
    gradients: usize,
) {
    let texts = crate::ir::print::node_texts(program);
    let summary = Summary {
        nodes: texts
            .into_iter()
            .zip(locations)
            .map(|((op, ty), &l)| (op, ty, l))
            .collect(),
        inputs: program.nodes.iter().map(|n| n.inputs.to_vec()).collect(),
        params: program.params.clone(),
    };
    let site = site();
    let mut st = STATE.lock();
    let cause = if st.evicted.contains(&hash(key)) {
        CompileCause::Evicted
    } else if let Some(why) = st.recapture.take() {
        CompileCause::Recaptured(why)
    } else {
        match site.and_then(|s| st.sites.get(&s.on(device))) {
            Some(log) if !log.recent.is_empty() => cause::cause(&summary, &log.recent),
            _ => CompileCause::FirstAtSite,
        }
    };
    let automatic = match &cause {
        CompileCause::InputChanged {
            input,
            before,
            now,
            bound_only: false,
            ..
        } => {
            let at = summary.nodes[summary.params[*input]].2;
            let dims = changed_dims(before, now);
            let made = !cause::is_ours(at) && super::auto_dynamic::register(at, &dims);
            made.then_some((*input, at, dims))
        }
        _ => None,
    };
    let entry = CompileEntry {
        cause,
        site: site.map_or("a sync".into(), |s| s.to_string()),
        nodes: program.nodes.len(),
        inputs: program.params.len(),
        outputs: program.outputs.len(),
        gradients,
        compile_time: time,
    };
    if let Some(s) = site {
        let log = st.sites.entry(s.on(device)).or_default();
        if log.recent.len() == RECENT {
            log.recent.pop_front();
        }
        log.recent.push_back(summary);
    }
    if st.log.len() == LOG {
        st.log.pop_front();
    }
    st.log.push_back(entry.clone());
    drop(st);
    print(&entry);
    if let Some((input, at, dims)) = automatic {
        print(format_args!(
            "input {input}: dim {dims:?} of the data made at {} is dynamic from now on, with a \
             bucketed bound (automatic dynamic dims); mark_dynamic(dim, bound) there pins the \
             bound, set_automatic_dynamic(false) turns this off",
            self::at(at)
        ));
    }
}

/// The dims whose static sizes differ between two types of one dtype and
/// rank (`f32[32, 10]` and `f32[20, 10]`: dim 0).
fn changed_dims(before: &str, now: &str) -> smallvec::SmallVec<[usize; 2]> {
    let split = |t: &str| -> Option<(String, Vec<String>)> {
        let (dtype, dims) = t.split_once('[')?;
        let dims = dims.strip_suffix(']')?;
        Some((
            dtype.to_string(),
            dims.split(", ").map(str::to_string).collect(),
        ))
    };
    let (Some((da, a)), Some((db, b))) = (split(before), split(now)) else {
        return Default::default();
    };
    if da != db || a.len() != b.len() {
        return Default::default();
    }
    let static_size = |d: &str| d.parse::<u64>().ok();
    (0..a.len())
        .filter(
            |&d| matches!((static_size(&a[d]), static_size(&b[d])), (Some(x), Some(y)) if x != y),
        )
        .collect()
}

fn hash(key: &[u8]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    key.hash(&mut h);
    h.finish()
}

/// Tells the diagnostics that the compile cache evicted `key`.
pub(crate) fn evicted(key: &[u8]) {
    let mut st = STATE.lock();
    if st.evicted.len() < 1 << 16 {
        st.evicted.insert(hash(key));
    }
}

/// A captured step records again because of `why`: the compile its
/// recording makes, if any, is attributed to it.
pub(crate) fn recapture(why: String) {
    print(format_args!("capture records again: {why}"));
    STATE.lock().recapture = Some(why);
}

/// Clears a recapture reason that no compile took (the recording found
/// its program in the cache).
pub(crate) fn recapture_done() {
    STATE.lock().recapture = None;
}

/// A read (not `mark_step`) ran a program computing `what`.
pub(crate) fn forced(what: impl FnOnce() -> String) {
    let Some(site) = site() else { return };
    if matches!(site.kind, "mark_step" | "capture") {
        return;
    }
    let what = what();
    let mut st = STATE.lock();
    let e = st
        .forced
        .entry(site.key())
        .or_insert_with(|| (site, 0, String::new()));
    e.1 += 1;
    e.2.clone_from(&what);
    let first = e.1 == 1;
    drop(st);
    if first {
        print(format_args!(
            "{site} ran a program before mark_step, computing {what} (later runs at this site are counted, not printed)"
        ));
    }
}

/// The report's section: compiles by cause and site, reads that ran
/// programs by site.
fn summary() -> String {
    summary_of(&STATE.lock())
}

/// Forgets the compile log and the reads counted (`metrics::reset`); the
/// programs each site compiled stay, to compare later ones with.
fn clear() {
    let mut st = STATE.lock();
    st.log.clear();
    st.forced.clear();
}

fn summary_of(st: &State) -> String {
    let mut out = String::new();
    if st.log.is_empty() && st.forced.is_empty() {
        return out;
    }
    use std::fmt::Write;
    let _ = writeln!(out, "  compiles by cause:");
    let mut by: Vec<(String, usize)> = Vec::new();
    for e in &st.log {
        let cause = match &e.cause {
            CompileCause::FirstAtSite => "first at its site",
            CompileCause::InputChanged {
                bound_only: true, ..
            } => "an input's bound changed",
            CompileCause::InputChanged { .. } => "an input's type changed",
            CompileCause::ConstantChanged { .. } => "a constant changed",
            CompileCause::GraphChanged { .. } => "another graph",
            CompileCause::Evicted => "evicted before",
            CompileCause::Recaptured(_) => "a captured step recorded again",
            CompileCause::OptionsChanged => "other options",
        };
        let key = format!("{cause} ({})", e.site);
        match by.iter_mut().find(|(k, _)| *k == key) {
            Some(b) => b.1 += 1,
            None => by.push((key, 1)),
        }
    }
    for (k, n) in &by {
        let _ = writeln!(out, "    {n:>5}  {k}");
    }
    let mut big: Vec<&CompileEntry> = st.log.iter().collect();
    big.sort_by_key(|e| std::cmp::Reverse(e.nodes));
    if let Some(e) = big.first() {
        let _ = writeln!(out, "  largest program: {} nodes, {}", e.nodes, e.site);
    }
    if !st.forced.is_empty() {
        let _ = writeln!(out, "  reads that ran a program before mark_step:");
        let mut f: Vec<_> = st.forced.values().collect();
        f.sort_by_key(|e| std::cmp::Reverse(e.1));
        for (site, n, what) in f {
            let _ = writeln!(out, "    {n:>5}  {site} (last: {what})");
        }
    }
    out
}

/// Installs the summary as a section of `metrics::report()`.
fn install() {
    static DONE: AtomicBool = AtomicBool::new(false);
    if !DONE.swap(true, Ordering::Relaxed) {
        crate::metrics::set_report_section(summary, clear);
    }
}
