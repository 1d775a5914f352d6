//! How a value is split over the partitions of an SPMD program: XLA's
//! tiled `HloSharding` (GSPMD), as a tile count per dimension and the
//! partition that holds each tile.
//!
//! Partition `p` is the `p`th device of the mesh the program runs on
//! (its device assignment). A value of static shape `dims` is cut along
//! dimension `d` into `tiles[d]` blocks of `ceil(dims[d] / tiles[d])`
//! elements, the last ones shorter or empty (XLA pads them); the
//! partitions that hold the same tile hold copies of it (a trailing
//! replicated group of `replicas` devices, XLA's
//! `last_tile_dim_replicate`).

/// How a value is split over the devices of a mesh (see the `sharding`
/// module's docs): the number of pieces along each dimension
/// and which device holds which piece.
///
/// ```
/// use lazyxla::sharding::Mesh;
/// lazyxla::set_cpu_device_count(4).unwrap();
/// let devices = lazyxla::Device::reference().scoped(lazyxla::devices);
/// let mesh = Mesh::new(&devices, &[2, 2], &["data", "model"]).unwrap();
/// let s = mesh.sharding(&[Some("data"), None]).unwrap();
/// assert_eq!(s.tiles(), &[2, 1]);
/// assert_eq!(s.replicas(), 2); // each half is on two devices
/// assert_eq!(s.shard_shape(&[8, 3]), vec![4, 3]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sharding {
    /// Pieces along each dimension.
    tiles: Vec<usize>,
    /// Devices holding each piece.
    replicas: usize,
    /// The partition of each (tile index..., replica), row-major over
    /// `tiles` then `replicas`.
    devices: Vec<usize>,
}

impl Sharding {
    /// A sharding from its parts; `None` unless `devices` lists each of
    /// `0..product(tiles) * replicas` once.
    pub(crate) fn new(tiles: Vec<usize>, replicas: usize, devices: Vec<usize>) -> Option<Sharding> {
        let n = tiles.iter().product::<usize>() * replicas;
        let mut seen = vec![false; n];
        if devices.len() != n || replicas == 0 {
            return None;
        }
        for &d in &devices {
            if d >= n || std::mem::replace(&mut seen[d], true) {
                return None;
            }
        }
        Some(Sharding {
            tiles,
            replicas,
            devices,
        })
    }

    /// The number of pieces along each dimension.
    pub fn tiles(&self) -> &[usize] {
        &self.tiles
    }

    /// How many devices hold each piece (the whole mesh for a replicated
    /// value).
    pub fn replicas(&self) -> usize {
        self.replicas
    }

    /// The number of devices.
    pub fn device_count(&self) -> usize {
        self.devices.len()
    }

    /// True when every device holds the whole value.
    pub fn is_replicated(&self) -> bool {
        self.tiles.iter().all(|&t| t == 1)
    }

    /// The shape of the piece each device holds of a value of shape
    /// `dims` (padded: `ceil(dims[d] / tiles[d])` along each dim).
    pub fn shard_shape(&self, dims: &[usize]) -> Vec<usize> {
        dims.iter()
            .zip(&self.tiles)
            .map(|(&n, &t)| n.div_ceil(t))
            .collect()
    }

    /// The tile index of device `p` along each dimension.
    fn tile_of(&self, p: usize) -> Vec<usize> {
        let at = self.devices.iter().position(|&d| d == p).unwrap_or(0) / self.replicas;
        let mut idx = vec![0; self.tiles.len()];
        let mut rest = at;
        for d in (0..self.tiles.len()).rev() {
            idx[d] = rest % self.tiles[d];
            rest /= self.tiles[d];
        }
        idx
    }

    /// The block of a value of shape `dims` that device `p` holds: its
    /// start and its real length along each dimension (the length may be
    /// shorter than [`Sharding::shard_shape`], even 0, for the last
    /// pieces of an uneven split).
    pub fn block(&self, p: usize, dims: &[usize]) -> Vec<(usize, usize)> {
        let shard = self.shard_shape(dims);
        self.tile_of(p)
            .iter()
            .zip(dims.iter().zip(&shard))
            .map(|(&i, (&n, &c))| {
                let start = (i * c).min(n);
                (start, (start + c).min(n) - start)
            })
            .collect()
    }

    /// The `mhlo.sharding` attribute: `{replicated}`, or
    /// `{devices=[t0,t1,..]p0,p1,..}` with a trailing replicated group
    /// (`last_tile_dim_replicate`) when pieces are on several devices.
    pub fn hlo(&self) -> String {
        if self.is_replicated() {
            return "{replicated}".into();
        }
        let mut dims: Vec<String> = self.tiles.iter().map(|t| t.to_string()).collect();
        if self.replicas > 1 {
            dims.push(self.replicas.to_string());
        }
        let devices: Vec<String> = self.devices.iter().map(|d| d.to_string()).collect();
        let last = if self.replicas > 1 {
            " last_tile_dim_replicate"
        } else {
            ""
        };
        format!(
            "{{devices=[{}]{}{last}}}",
            dims.join(","),
            devices.join(",")
        )
    }
}

impl std::fmt::Display for Sharding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.hlo())
    }
}

/// Copies the block `extent` at `src_at` of a row-major array of shape
/// `src_dims` to `dst_at` of one of shape `dst_dims`, elements of
/// `elt` bytes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy_block(
    src: &[u8],
    src_dims: &[usize],
    src_at: &[usize],
    dst: &mut [u8],
    dst_dims: &[usize],
    dst_at: &[usize],
    extent: &[usize],
    elt: usize,
) {
    if extent.contains(&0) {
        return;
    }
    let rank = extent.len();
    if rank == 0 {
        dst[..elt].copy_from_slice(&src[..elt]);
        return;
    }
    let strides = |dims: &[usize]| {
        let mut s = vec![1usize; dims.len()];
        for d in (0..dims.len().saturating_sub(1)).rev() {
            s[d] = s[d + 1] * dims[d + 1];
        }
        s
    };
    let (ss, ds) = (strides(src_dims), strides(dst_dims));
    let row = extent[rank - 1] * elt;
    let mut idx = vec![0usize; rank - 1];
    loop {
        let mut so = src_at[rank - 1];
        let mut doff = dst_at[rank - 1];
        for d in 0..rank - 1 {
            so += (src_at[d] + idx[d]) * ss[d];
            doff += (dst_at[d] + idx[d]) * ds[d];
        }
        dst[doff * elt..doff * elt + row].copy_from_slice(&src[so * elt..so * elt + row]);
        let mut d = rank - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < extent[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_and_attributes() {
        // A 2x2 mesh, dim 0 over axis 0, replicated over axis 1.
        let s = Sharding::new(vec![2, 1], 2, vec![0, 1, 2, 3]).unwrap();
        assert_eq!(s.hlo(), "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}");
        assert_eq!(s.block(0, &[5, 3]), vec![(0, 3), (0, 3)]);
        assert_eq!(s.block(1, &[5, 3]), vec![(0, 3), (0, 3)]);
        assert_eq!(s.block(2, &[5, 3]), vec![(3, 2), (0, 3)]);
        assert_eq!(
            Sharding::new(vec![1, 1], 4, vec![0, 1, 2, 3])
                .unwrap()
                .hlo(),
            "{replicated}"
        );
        assert!(Sharding::new(vec![2], 1, vec![0, 0]).is_none());
        let t = Sharding::new(vec![4], 1, vec![3, 2, 1, 0]).unwrap();
        assert_eq!(t.block(3, &[8]), vec![(0, 2)]);
        assert_eq!(t.block(0, &[7]), vec![(6, 1)]);
    }

    #[test]
    fn copies_blocks() {
        let src: Vec<u8> = (0..12).collect(); // [3, 4]
        let mut dst = vec![0u8; 4]; // [2, 2]
        copy_block(
            &src,
            &[3, 4],
            &[1, 2],
            &mut dst,
            &[2, 2],
            &[0, 0],
            &[2, 2],
            1,
        );
        assert_eq!(dst, vec![6, 7, 10, 11]);
    }
}
