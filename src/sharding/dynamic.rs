//! Bounded dynamic sizes in sharded programs.
//!
//! Splitting a dynamic dim over a mesh axis is refused when the
//! sharding is marked ([`check_split`]'s error names the dim and its
//! size); dims that stay whole compile as on one device.

use crate::ir::sharding::Sharding;
use crate::symint::SizeExpr;
use crate::{Error, Result};

/// Refuses a sharding that splits a dynamic dim of `shape`, naming the
/// dim and its size.
pub(crate) fn check_split(shape: &[SizeExpr], sharding: &Sharding) -> Result<()> {
    for (d, (e, &t)) in shape.iter().zip(sharding.tiles()).enumerate() {
        if e.as_const().is_none() && t > 1 {
            return Err(Error::invalid(
                "mark_sharding",
                format!(
                    "dim {d} has the dynamic size {e}, which cannot be split over {t} devices (XLA's partitioner does not split dynamic dims; see lazyxla::sharding::dynamic); split a static dim, or leave this one whole"
                ),
            ));
        }
    }
    Ok(())
}
