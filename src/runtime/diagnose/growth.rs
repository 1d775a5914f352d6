//! Graphs too large to compile, and graphs that grow with every program
//! a site compiles: a warning, then an error before XLA sees them.
//!
//! A site whose programs grow four times in a row gets a warning naming
//! the line that recorded most of the graph; past 64 growing programs, or
//! 4M nodes, the compile is refused with `Error::GrowingGraph` before XLA,
//! whose compiler aborted the process after about a hundred growing
//! programs.

use super::{site, STATE};
use crate::ir::program::Program;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The largest number of nodes a program may have: far above any model's
/// step, below what exhausts XLA's compiler. 0 until set or read.
static MAX_NODES: AtomicUsize = AtomicUsize::new(0);
/// How many programs in a row one site may compile, each larger than the
/// last: a graph that grows every step compiles a new program every step,
/// and XLA's compiler aborted the process after about a hundred of them
/// ("Unable to allocate section memory"). 0 until set or read.
static MAX_GROWING: AtomicUsize = AtomicUsize::new(0);

fn limit(slot: &AtomicUsize, env: &str, default: usize) -> usize {
    match slot.load(Ordering::Relaxed) {
        0 => {
            let v = std::env::var(env)
                .ok()
                .and_then(|v| v.parse().ok())
                .filter(|&v| v > 0)
                .unwrap_or(default);
            let _ = slot.compare_exchange(0, v, Ordering::Relaxed, Ordering::Relaxed);
            slot.load(Ordering::Relaxed)
        }
        v => v,
    }
}

fn max_nodes() -> usize {
    limit(&MAX_NODES, "LAZYXLA_MAX_GRAPH_NODES", 4_000_000)
}

fn max_growing() -> usize {
    limit(&MAX_GROWING, "LAZYXLA_MAX_GROWING_PROGRAMS", 64)
}

/// Sets the limits on what reaches XLA's compiler: the most nodes one
/// program may have (`LAZYXLA_MAX_GRAPH_NODES`, default 4 000 000) and how
/// many programs in a row one sync site may compile, each larger than the
/// last, before the next is an error (`LAZYXLA_MAX_GROWING_PROGRAMS`,
/// default 64; a warning comes at the fourth). 0 keeps a limit as it is.
///
/// ```
/// lazyxla::debug::set_graph_limits(1_000_000, 16);
/// ```
pub fn set_graph_limits(max_nodes: usize, max_growing_programs: usize) {
    if max_nodes > 0 {
        MAX_NODES.store(max_nodes, Ordering::Relaxed);
    }
    if max_growing_programs > 0 {
        MAX_GROWING.store(max_growing_programs, Ordering::Relaxed);
    }
}

/// Checks a program about to compile for `device` against the limits on graph size
/// and growth (`largest` names the line that recorded most of the
/// graph); warns once per site when its programs keep growing.
pub(crate) fn before_compile(
    device: usize,
    program: &Program,
    largest: impl FnOnce() -> String,
) -> crate::Result<()> {
    let nodes = program.nodes.len();
    let site = site();
    if nodes > max_nodes() {
        return Err(crate::Error::GrowingGraph {
            site: site.map_or("a sync".to_string(), |s| s.to_string()),
            message: format!(
                "the program has {nodes} nodes, above the limit of {} (LAZYXLA_MAX_GRAPH_NODES); \
                 {} were never computed: call mark_step() once per \
                 iteration, or detach() a value carried from one iteration to the next",
                max_nodes(),
                largest()
            ),
        });
    }
    let Some(site) = site else { return Ok(()) };
    let mut st = STATE.lock();
    let log = st.sites.entry(site.on(device)).or_default();
    let growing = match nodes > log.last_nodes && log.last_nodes > 0 {
        true => log.growing + 1,
        false => 0,
    };
    if growing >= max_growing() {
        return Err(crate::Error::GrowingGraph {
            site: site.to_string(),
            message: format!(
                "{growing} programs in a row compiled here each had more nodes than the last \
                 ({nodes} now; the limit is LAZYXLA_MAX_GROWING_PROGRAMS = {}): {} \
                 grow with every iteration; call mark_step() once per iteration, or detach() \
                 the value carried from one iteration to the next",
                max_growing(),
                largest()
            ),
        });
    }
    log.growing = growing;
    log.last_nodes = nodes;
    if growing >= 3 && !log.warned {
        log.warned = true;
        let text = format!(
            "warning: the programs compiled at {site} grow every time ({nodes} nodes now, {} \
             programs in a row): {} keep their history from every iteration; call \
             mark_step() once per iteration, or detach() the value carried from one iteration to \
             the next (past {} growing programs this is an error)",
            growing + 1,
            largest(),
            max_growing()
        );
        super::warn(&mut st, text);
    }
    Ok(())
}
