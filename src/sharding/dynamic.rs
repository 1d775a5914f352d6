//! Bounded dynamic sizes in sharded programs: what XLA's SPMD
//! partitioner does with a dim whose size is dynamic (`tensor<?x..>`
//! with a bound), measured on both CPU plugins (`lammps-jax-pjrt-cpu`
//! 0.11.2, C API 0.115, and `xla-cpu-pjrt`, C API 0.81) by
//! `tests/sharding_dynamic.rs`, and what lazyxla does.
//!
//! | case | both plugins | lazyxla |
//! |---|---|---|
//! | a dynamic dim left whole in a sharded step (`x[8, 6]` split by rows, columns picked by a `nonzero`) | compiles once, correct for every size | supported |
//! | `nonzero` of a split value | XLA gathers the value; correct | supported |
//! | a split dynamic batch dim of a value marked dynamic (`mark_dynamic(0, 8)`, a constraint splits dim 0 over 4) | compiles, correct | supported |
//! | a split `nonzero` dim in a masked zone (never read, reduced: the lowering keeps it static at its bound with a mask) | compiles, correct | supported |
//! | a split `nonzero` dim that is packed (read, sliced, indexed) | compile error "Dynamic dimension propagation on DynamicSlice where a partial dimension is selected" | a compile error naming the `mark_sharding` node, the dim and its bound |
//! | splitting the computed data of a dynamic value | (not tried: the pieces would need per-device sizes) | refused by `mark_sharding`, which says to split it while pending |
//!
//! So a dynamic dim may be split where XLA sees a static buffer with a
//! size beside it (an input's bound, a masked zone), and not where its
//! dynamic padder must move real elements across devices (a packed
//! `nonzero`, whose real rows are a prefix that the partitioner would
//! have to slice at a dynamic offset). Each device's piece of a split
//! dynamic dim is `bound / devices` long; padding stays padding.
