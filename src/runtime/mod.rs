//! The runtime: from pending IR roots to device data. It traces roots into
//! a canonical program and its key, compiles through the cache, runs it,
//! and returns data leaves (and computed sizes); it knows no `Tensor`: the
//! tensor layer rebinds its handles to what the runtime returns.

pub(crate) mod auto_dynamic;
pub(crate) mod buckets;
pub(crate) mod cache;
pub(crate) mod canonical;
pub(crate) mod device_data;
pub(crate) mod diagnose;
pub(crate) mod donation;
pub(crate) mod materialize;
pub(crate) mod precision;
pub(crate) mod size_cell;
pub(crate) mod size_values;
pub(crate) mod sync;
