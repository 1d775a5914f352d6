//! The runtime: live tensors, sync (`mark_step`, reads, size
//! materialisation), canonical programs, the compile cache and metrics.

pub(crate) mod cache;
pub(crate) mod canonical;
pub(crate) mod capture;
pub(crate) mod device_data;
pub(crate) mod materialize;
pub(crate) mod registry;
pub(crate) mod size_cell;
pub(crate) mod sync;
