//! The lazy IR: nodes, the closed op set, shape inference and the printer.

pub(crate) mod check;
pub(crate) mod collective;
pub mod conv;
pub mod dot;
pub mod elementwise;
pub(crate) mod infer;
pub(crate) mod leaf;
pub mod loops;
pub(crate) mod node;
pub mod op;
pub(crate) mod passes;
pub(crate) mod print;
pub(crate) mod program;
pub(crate) mod random;
pub(crate) mod sharding;
pub(crate) mod size_source;
pub(crate) mod window;

pub use conv::Conv;
pub use dot::Dot;
pub use node::{live_node_count, Node};
pub use op::{
    ArgKind, BinaryOp, CmpOp, Family, Lit, Op, PadFill, ReduceKind, ScatterMode, UnaryOp, Window,
    WindowKind,
};
