//! Naming why a program compiled: a new program compared with the last
//! ones its site compiled, node by node.

use super::at;
use std::collections::VecDeque;
use std::fmt;
use std::panic::Location;
use std::sync::LazyLock;
use std::time::Duration;

/// Why a program compiled (one entry of [`compile_log`](crate::debug::compile_log)).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CompileCause {
    /// The first program compiled at this sync site.
    FirstAtSite,
    /// The same graph as a program this site compiled before, but for an
    /// input of another dtype, static size or bound.
    InputChanged {
        /// The input's position among the program's inputs.
        input: usize,
        /// Where the input's data was made (`src/main.rs:40`).
        created_at: String,
        /// Its type in the cached program (`f32[<=64, 768]`).
        before: String,
        /// Its type now.
        now: String,
        /// True when only dynamic bounds changed (another bucket).
        bound_only: bool,
    },
    /// A scalar constant of the graph has another value.
    ConstantChanged {
        /// The value now.
        value: String,
        /// The value in the cached program.
        before: String,
        /// Where the op using it was recorded.
        at: String,
    },
    /// Another graph: the first op that differs from the closest program
    /// this site compiled before.
    GraphChanged {
        /// The op now, with its attributes and type.
        op: String,
        /// Where it was recorded.
        at: String,
        /// The op in its place in the cached program (or `end of program`).
        cached_op: String,
        /// Where that one was recorded.
        cached_at: String,
    },
    /// The same program as one compiled before, which the compile cache
    /// evicted (`LAZYXLA_CACHE_SIZE`).
    Evicted,
    /// A captured step recorded again (`lazyxla::capture`), and why.
    Recaptured(String),
    /// The same graph and inputs, other program options (donated buffers,
    /// the precision of products, bucketed buffers).
    OptionsChanged,
}

impl fmt::Display for CompileCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileCause::FirstAtSite => write!(f, "the first program at this site"),
            CompileCause::InputChanged {
                input,
                created_at,
                before,
                now,
                bound_only,
            } => {
                write!(
                    f,
                    "input {input} (created at {created_at}) is {now}, the cached program's was {before}"
                )?;
                match bound_only {
                    true => write!(f, ": its bound changed (a new bucket, or mark_dynamic with another bound)"),
                    false => write!(f, ": mark_dynamic(dim, bound) the dim that varies where the input is made, so one program serves every size (or set_automatic_dynamic(true))"),
                }
            }
            CompileCause::ConstantChanged { value, before, at } => write!(
                f,
                "the constant {value} at {at} was {before} in the cached program: a value that \
                 changes between steps belongs in a tensor (Tensor::scalar), or for a learning \
                 rate in the optimizer's set_lr"
            ),
            CompileCause::GraphChanged {
                op,
                at,
                cached_op,
                cached_at,
            } => write!(
                f,
                "another graph: `{op}` at {at} where the cached program has `{cached_op}` at {cached_at}"
            ),
            CompileCause::Evicted => write!(
                f,
                "compiled before and evicted from the compile cache (raise LAZYXLA_CACHE_SIZE)"
            ),
            CompileCause::Recaptured(why) => write!(f, "the captured step recorded again: {why}"),
            CompileCause::OptionsChanged => write!(
                f,
                "the same graph with other options (donated buffers, matmul precision or bucketed buffers)"
            ),
        }
    }
}

/// One compile: its cause, where, how big, how long.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CompileEntry {
    /// Why it compiled.
    pub cause: CompileCause,
    /// The sync that compiled it: `mark_step at src/main.rs:40`.
    pub site: String,
    /// Nodes of the program.
    pub nodes: usize,
    /// Its inputs (device data).
    pub inputs: usize,
    /// Its outputs.
    pub outputs: usize,
    /// How many of its outputs are gradients (`Tensor::grad`), results
    /// only because they were still alive at the sync: clearing them
    /// after the optimizer's step (`zero_grad()`), when nothing reads
    /// them, leaves them out (README, "Memory").
    pub gradients: usize,
    /// Time in the backend's compiler.
    pub compile_time: Duration,
}

impl fmt::Display for CompileEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gradients = match self.gradients {
            0 => String::new(),
            n => format!(
                " ({n} of them gradients kept alive: `zero_grad()` after the optimizer's step leaves them out)"
            ),
        };
        write!(
            f,
            "compiled at {} ({} nodes, {} inputs, {} outputs{gradients}, {:.1} ms): {}",
            self.site,
            self.nodes,
            self.inputs,
            self.outputs,
            self.compile_time.as_secs_f64() * 1e3,
            self.cause
        )
    }
}

/// A compiled program as the diagnostics keep it.
pub(super) struct Summary {
    /// Per node: op text, type text, where recorded.
    pub nodes: Vec<(String, String, &'static Location<'static>)>,
    /// Per node, its operands.
    pub inputs: Vec<Vec<usize>>,
    /// Node indices of the inputs.
    pub params: Vec<usize>,
}

/// The cause of compiling `new` at a site that compiled `recent`.
pub(super) fn cause(new: &Summary, recent: &VecDeque<Summary>) -> CompileCause {
    // The closest: the longest run of equal nodes from the start.
    let common = |old: &Summary| {
        new.nodes
            .iter()
            .zip(&old.nodes)
            .take_while(|(a, b)| a.0 == b.0 && a.1 == b.1)
            .count()
    };
    let closest = recent
        .iter()
        .rev()
        .max_by_key(|old| (common(old), old.nodes.len() == new.nodes.len()))
        .expect("a site with programs");
    // The same ops, scalars' values aside: an input that changed is named
    // first (one trap at a time).
    let same_ops =
        new.nodes.len() == closest.nodes.len()
            && new.nodes.iter().zip(&closest.nodes).all(|(a, b)| {
                a.0 == b.0 || (a.0.starts_with("scalar ") && b.0.starts_with("scalar "))
            });
    if same_ops {
        // An input's type (one the user made, first), then anything else's.
        let changed: Vec<(usize, usize)> = new
            .params
            .iter()
            .enumerate()
            .filter(|&(_, &p)| new.nodes[p].1 != closest.nodes[p].1)
            .map(|(k, &p)| (k, p))
            .collect();
        let users = changed.iter().find(|&&(_, p)| !is_ours(new.nodes[p].2));
        if let Some(&(k, p)) = users.or(changed.first()) {
            let (a, b) = (&new.nodes[p], &closest.nodes[p]);
            return CompileCause::InputChanged {
                input: k,
                created_at: at(a.2),
                before: b.1.clone(),
                now: a.1.clone(),
                bound_only: static_part(&a.1) == static_part(&b.1),
            };
        }
    }
    let i = common(closest);
    if let (Some(a), Some(b)) = (new.nodes.get(i), closest.nodes.get(i)) {
        if a.0.starts_with("scalar ") && b.0.starts_with("scalar ") {
            return CompileCause::ConstantChanged {
                value: a.0["scalar ".len()..].to_string(),
                before: b.0["scalar ".len()..].to_string(),
                at: user_at(new, i),
            };
        }
    }
    // The first op that differs, constants (and their broadcasts) aside:
    // `relu` against `exp` is `max` against `exp`, not a scalar 0 against
    // `exp`.
    let (ours, theirs) = (new.ops(), closest.ops());
    let k = ours
        .iter()
        .zip(&theirs)
        .take_while(|&(&x, &y)| {
            new.nodes[x].0 == closest.nodes[y].0 && new.nodes[x].1 == closest.nodes[y].1
        })
        .count();
    let text = |s: &Summary, i: usize| format!("{}: {}", s.nodes[i].0, s.nodes[i].1);
    match (ours.get(k), theirs.get(k)) {
        (None, None) => CompileCause::OptionsChanged,
        (a, b) => CompileCause::GraphChanged {
            op: a.map_or("end of program".into(), |&x| text(new, x)),
            at: a.map_or("-".into(), |&x| user_at(new, x)),
            cached_op: b.map_or("end of program".into(), |&y| text(closest, y)),
            cached_at: b.map_or("-".into(), |&y| user_at(closest, y)),
        },
    }
}

impl Summary {
    /// The nodes that are not constants: scalars, and broadcasts or
    /// conversions of constants only.
    fn ops(&self) -> Vec<usize> {
        let mut constant = vec![false; self.nodes.len()];
        let mut out = Vec::new();
        for (i, (op, _, _)) in self.nodes.iter().enumerate() {
            let derived = (op.starts_with("broadcast") || op.starts_with("convert"))
                && self.inputs[i].iter().all(|&j| constant[j]);
            constant[i] = op.starts_with("scalar ") || derived;
            if !constant[i] {
                out.push(i);
            }
        }
        out
    }
}

/// Where node `i` was recorded in the user's code: its own location, or
/// for an op lazyxla recorded for another, that op's user (`consumer`).
fn user_at(s: &Summary, i: usize) -> String {
    let own = s.nodes[i].2;
    match is_ours(own) {
        true => at(consumer(s, i).unwrap_or(own)),
        false => at(own),
    }
}

/// Where the first op using node `i`, directly or through lazyxla's own
/// ops, was recorded outside lazyxla: a scalar's node is shared by the
/// ops that use its value, so its own location says little.
fn consumer(s: &Summary, i: usize) -> Option<&'static Location<'static>> {
    let mut reached = vec![false; s.nodes.len()];
    reached[i] = true;
    for j in i + 1..s.nodes.len() {
        if s.inputs[j].iter().any(|&k| reached[k]) {
            if !is_ours(s.nodes[j].2) {
                return Some(s.nodes[j].2);
            }
            reached[j] = true;
        }
    }
    None
}

/// The path of lazyxla's source folder as locations name it (`src/`
/// building lazyxla itself, longer as a dependency).
static OURS_PREFIX: LazyLock<&'static str> = LazyLock::new(|| {
    let me = file!();
    me.strip_suffix("runtime/diagnose/cause.rs").unwrap_or(me)
});

/// True for a location in lazyxla's own source (an op that another op of
/// lazyxla recorded, out of reach of `#[track_caller]`).
pub(crate) fn is_ours(l: &Location<'_>) -> bool {
    l.file().starts_with(*OURS_PREFIX)
}

/// A type's dtype and static sizes, bounds left out: `f32[<=64, 3]` and
/// `f32[<=128, 3]` differ only in a bound.
fn static_part(ty: &str) -> String {
    ty.split(", ")
        .map(|d| match d.find("<=") {
            Some(p) => &d[..p],
            None => d,
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The diagnostics tell lazyxla's own lines from the user's by this
    /// file's path: it must still name this crate's source folder.
    #[test]
    fn lazyxla_s_own_lines_are_recognised() {
        assert!(is_ours(Location::caller()));
        let elsewhere = format!("examples/{}", file!());
        assert!(!elsewhere.starts_with(*OURS_PREFIX));
    }
}
