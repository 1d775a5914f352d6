//! Several devices as one: where a program runs and its values live
//! ([`Placement`]), and [`Group`], the backend of a replicated device or
//! a mesh over the devices of either backend.
//!
//! A placement is one device; `n` replicas of one program (XLA's replica
//! mode), where every device holds its own whole value of each tensor,
//! with its own real sizes (how each replica's part of an uneven batch
//! has its own length); or one program split over a mesh of `n` devices
//! (SPMD), where a value is whole on every device (the replicated
//! sharding) or split by its sharding. A group's value is one buffer per
//! device, device `r`'s held by member `r`: [`Storage::Replicas`] for
//! whole values, [`Storage::Shards`] with the sharding for split ones.
//!
//! What differs between the backends is how a program is compiled for a
//! placement and run on all members at once ([`Member`]). Everything
//! else a group does (uploads, downloads, sizes, check statuses, copies)
//! is written once here, from the members' one-device operations, so
//! the reference backend keeps the pieces of a split value as XLA does
//! and checks the same splitting and assembling.

use super::{Backend, DeviceBuffer, ExecArgs, ExecOutputs, ExecutableRef, Shards, Storage};
use crate::error::{Error, Result};
use crate::host::HostArray;
use crate::ir::program::Program;
use crate::ir::sharding::Sharding;
use std::sync::Arc;

/// Where a program runs and where its values live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Placement {
    /// One device, every value whole on it.
    One,
    /// `n` replicas of one program, one per device; collectives
    /// (`Tensor::all_reduce`, ..) combine them.
    Replicas(usize),
    /// One program over a mesh of `n` devices, split by its values'
    /// shardings (XLA's partitioner inserts the collectives).
    Mesh(usize),
}

impl Placement {
    /// How many devices it spans.
    pub fn devices(self) -> usize {
        match self {
            Placement::One => 1,
            Placement::Replicas(n) | Placement::Mesh(n) => n,
        }
    }

    /// How many replicas run each program (1 unless [`Placement::Replicas`]).
    pub fn replicas(self) -> usize {
        match self {
            Placement::Replicas(n) => n,
            Placement::One | Placement::Mesh(_) => 1,
        }
    }

    /// How many partitions run each program (1 unless [`Placement::Mesh`]).
    pub fn partitions(self) -> usize {
        match self {
            Placement::Mesh(n) => n,
            Placement::One | Placement::Replicas(_) => 1,
        }
    }
}

/// One output of a program run on a group: each member's buffer, in
/// member order, and for a mesh the sharding of a split output (`None`:
/// whole on every device).
pub(crate) struct PlacedOutput {
    pub parts: Vec<DeviceBuffer>,
    pub sharding: Option<Arc<Sharding>>,
}

/// A backend's one device as a member of a [`Group`]: the operations on
/// several devices at once that only the backend can do.
pub(crate) trait Member: Backend + Sized + 'static {
    /// The backend's name without the device (`pjrt:cpu`, `reference`):
    /// a group's name is this and its members' ordinals.
    fn platform(&self) -> String;
    /// The device's index among its backend's devices.
    fn ordinal(&self) -> usize;
    /// A size buffer holding `v` on this device.
    fn upload_size(&self, v: i64) -> Result<DeviceBuffer>;
    /// Compiles `program` for `placement` over `members`.
    fn compile_placed(
        members: &[Self],
        placement: Placement,
        program: &Program,
    ) -> Result<ExecutableRef>;
    /// Runs a program compiled by [`Member::compile_placed`] on every
    /// member at once; `args` hold group buffers (one part per member).
    /// Its outputs in `ExecOutputs` order.
    fn execute_placed(
        members: &[Self],
        placement: Placement,
        exe: &ExecutableRef,
        args: &ExecArgs<'_>,
    ) -> Result<Vec<PlacedOutput>>;
}

/// Several devices of one backend as one device ([`Placement::Replicas`]
/// or [`Placement::Mesh`]); member `r` is the placement's device `r`.
pub(crate) struct Group<M> {
    members: Vec<M>,
    placement: Placement,
    name: String,
}

impl<M: Member> Group<M> {
    /// A group of `members` (distinct devices of one backend, checked by
    /// the caller) placed as `placement`, which spans `members.len()`.
    pub fn new(members: Vec<M>, placement: Placement) -> Result<Group<M>> {
        if members.is_empty() {
            return Err(Error::invalid(
                "replicas",
                "no devices given; pass at least one",
            ));
        }
        if placement.devices() != members.len() || placement == Placement::One {
            return Err(Error::internal(
                "replicas",
                format!("a placement {placement:?} over {} devices", members.len()),
            ));
        }
        let name = Group::name_of(&members, placement);
        Ok(Group {
            members,
            placement,
            name,
        })
    }

    /// The name of a group of `members` placed as `placement`: the
    /// platform and the members' ordinals, in brackets for replicas
    /// (`pjrt:cpu[0,1]`) and angle brackets for a mesh (`reference<0,1>`).
    pub fn name_of(members: &[M], placement: Placement) -> String {
        let list: Vec<String> = members.iter().map(|m| m.ordinal().to_string()).collect();
        let (open, close) = match placement {
            Placement::Mesh(_) => ('<', '>'),
            Placement::One | Placement::Replicas(_) => ('[', ']'),
        };
        let platform = members.first().map(M::platform).unwrap_or_default();
        format!("{platform}{open}{}{close}", list.join(","))
    }

    /// The members, in placement order.
    pub fn members(&self) -> &[M] {
        &self.members
    }

    fn n(&self) -> usize {
        self.members.len()
    }

    /// One whole value per member.
    fn replicated(&self, op: &'static str, parts: Vec<DeviceBuffer>) -> Result<DeviceBuffer> {
        if parts.len() != self.n() {
            return Err(Error::internal(
                op,
                format!("{} buffers for {} devices", parts.len(), self.n()),
            ));
        }
        Ok(DeviceBuffer::new(Storage::Replicas(parts.into())))
    }

    /// A replicated buffer of one value per member, `upload(member r,
    /// items[r])`; `items` (named `what` in the error) must be one each.
    fn one_each<T>(
        &self,
        items: &[T],
        what: &str,
        upload: impl Fn(&M, &T) -> Result<DeviceBuffer>,
    ) -> Result<DeviceBuffer> {
        if items.len() != self.n() {
            return Err(Error::internal(
                "upload",
                format!("{} {what} for {} replicas", items.len(), self.n()),
            ));
        }
        let parts = self
            .members
            .iter()
            .zip(items)
            .map(|(m, x)| upload(m, x))
            .collect::<Result<Vec<_>>>()?;
        self.replicated("upload", parts)
    }

    /// Each member's copy of `parts[r]` (every member's of `parts[0]`
    /// when there is one part); `None` when a member cannot copy it
    /// without the host.
    fn copy_parts(
        &self,
        from: &dyn Backend,
        parts: &[&DeviceBuffer],
    ) -> Result<Option<Vec<DeviceBuffer>>> {
        let mut out = Vec::with_capacity(self.n());
        for (r, m) in self.members.iter().enumerate() {
            let part = parts.get(r).unwrap_or(&parts[0]);
            match m.copy_from(from, part)? {
                Some(b) => out.push(b),
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }
}

impl<M: Member> Backend for Group<M> {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn placement(&self) -> Placement {
        self.placement
    }

    fn donates(&self) -> bool {
        // A sharded program's aliased results carry their parameters'
        // shardings (`lower::lower_with`), so each device's piece of an
        // update is written into its piece of the parameter.
        self.members[0].donates()
    }

    fn compile(&self, program: &Program) -> Result<ExecutableRef> {
        M::compile_placed(&self.members, self.placement, program)
    }

    fn execute(&self, exe: &ExecutableRef, args: &ExecArgs<'_>) -> Result<ExecOutputs> {
        let outputs = M::execute_placed(&self.members, self.placement, exe, args)?;
        let mut out = Vec::with_capacity(outputs.len());
        for o in outputs {
            out.push(Some(match o.sharding {
                Some(sharding) if !sharding.is_replicated() => {
                    DeviceBuffer::new(Storage::Shards(Box::new(Shards {
                        sharding,
                        parts: o.parts.into(),
                    })))
                }
                _ => self.replicated("execute", o.parts)?,
            }));
        }
        Ok(ExecOutputs::new(out))
    }

    fn synchronize(&self) -> Result<()> {
        let mut first = Ok(());
        for m in &self.members {
            let r = m.synchronize();
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    fn upload(&self, host: &HostArray, bound: &[usize]) -> Result<DeviceBuffer> {
        let parts = self
            .members
            .iter()
            .map(|m| m.upload(host, bound))
            .collect::<Result<Vec<_>>>()?;
        self.replicated("upload", parts)
    }

    fn upload_replicas(&self, hosts: &[HostArray], bound: &[usize]) -> Result<DeviceBuffer> {
        self.one_each(hosts, "arrays", |m, h| m.upload(h, bound))
    }

    fn upload_sizes(&self, sizes: &[i64]) -> Result<DeviceBuffer> {
        self.one_each(sizes, "sizes", |m, &v| m.upload_size(v))
    }

    fn upload_sharded(&self, host: &HostArray, sharding: &Arc<Sharding>) -> Result<DeviceBuffer> {
        if self.placement.partitions() != sharding.device_count() {
            return Err(Error::internal(
                "upload",
                format!(
                    "a sharding of {} devices on {}",
                    sharding.device_count(),
                    self.name
                ),
            ));
        }
        let shard = sharding.shard_shape(host.shape());
        let parts = self
            .members
            .iter()
            .enumerate()
            .map(|(p, m)| m.upload(&piece(host, sharding, p), &shard))
            .collect::<Result<Vec<_>>>()?;
        Ok(DeviceBuffer::new(Storage::Shards(Box::new(Shards {
            sharding: sharding.clone(),
            parts: parts.into(),
        }))))
    }

    fn download(&self, buffer: &DeviceBuffer, shape: &[usize]) -> Result<HostArray> {
        let Some(s) = buffer.sharding() else {
            return self.members[0].download(buffer.replica(0)?, shape);
        };
        let shard = s.shard_shape(shape);
        let pieces = self
            .members
            .iter()
            .enumerate()
            .map(|(p, m)| m.download(buffer.replica(p)?, &shard))
            .collect::<Result<Vec<_>>>()?;
        assemble(&pieces, shape, s)
    }

    fn download_replicas(
        &self,
        buffer: &DeviceBuffer,
        shapes: &[Vec<usize>],
    ) -> Result<Vec<HostArray>> {
        self.members
            .iter()
            .zip(shapes)
            .enumerate()
            .map(|(r, (m, s))| m.download(buffer.replica(r)?, s))
            .collect()
    }

    fn check_status(&self, exe: &ExecutableRef, status: &DeviceBuffer) -> Result<()> {
        // Every member waits for its part of the run before reading it;
        // the first failed check (in member order) is the error.
        let mut first = Ok(());
        for (r, m) in self.members.iter().enumerate() {
            let checked = m.check_status(exe, status.replica(r)?);
            if first.is_ok() {
                first = checked;
            }
        }
        first
    }

    fn read_size(&self, buffer: &DeviceBuffer) -> Result<i64> {
        self.members[0].read_size(buffer.replica(0)?)
    }

    fn read_sizes(&self, buffer: &DeviceBuffer) -> Result<Vec<i64>> {
        self.members
            .iter()
            .enumerate()
            .map(|(r, m)| m.read_size(buffer.replica(r)?))
            .collect()
    }

    fn copy_from(&self, from: &dyn Backend, buffer: &DeviceBuffer) -> Result<Option<DeviceBuffer>> {
        match buffer.storage() {
            // A split value's pieces stay where they are on a mesh of as
            // many devices; elsewhere they are put together on the host.
            Storage::Shards(s) if self.placement.partitions() == s.parts.len() => {
                let parts: Vec<&DeviceBuffer> = s.parts.iter().collect();
                Ok(self.copy_parts(from, &parts)?.map(|parts| {
                    DeviceBuffer::new(Storage::Shards(Box::new(Shards {
                        sharding: s.sharding.clone(),
                        parts: parts.into(),
                    })))
                }))
            }
            Storage::Shards(_) => Ok(None),
            // Each replica's own value to the replica of the same index.
            Storage::Replicas(src) if src.len() == self.n() => {
                let parts: Vec<&DeviceBuffer> = src.iter().collect();
                match self.copy_parts(from, &parts)? {
                    Some(parts) => self.replicated("copy between devices", parts).map(Some),
                    None => Ok(None),
                }
            }
            // One value (another replica count's first replica) to all.
            _ => match self.copy_parts(from, &[buffer])? {
                Some(parts) => self.replicated("copy between devices", parts).map(Some),
                None => Ok(None),
            },
        }
    }
}

/// Device `p`'s piece of `host` split by `s`: its block, zero-padded to
/// the shard shape.
pub(crate) fn piece(host: &HostArray, s: &Sharding, p: usize) -> HostArray {
    let dims = host.shape();
    let elt = host.dtype().size_in_bytes();
    let shard = s.shard_shape(dims);
    let block = s.block(p, dims);
    let mut out = vec![0u8; shard.iter().product::<usize>() * elt];
    let at: Vec<usize> = block.iter().map(|b| b.0).collect();
    let extent: Vec<usize> = block.iter().map(|b| b.1).collect();
    let zero = vec![0; dims.len()];
    let bytes = host.to_bytes();
    crate::ir::sharding::copy_block(&bytes, dims, &at, &mut out, &shard, &zero, &extent, elt);
    HostArray::from_bytes(host.dtype(), &shard, &out)
}

/// The whole value of shape `dims` put together from every device's
/// piece (`pieces[p]`, of the shard shape) of a value split by `s`.
pub(crate) fn assemble(pieces: &[HostArray], dims: &[usize], s: &Sharding) -> Result<HostArray> {
    let first = pieces
        .first()
        .ok_or_else(|| Error::internal("download", "a value in no pieces"))?;
    let dtype = first.dtype();
    let elt = dtype.size_in_bytes();
    let shard = s.shard_shape(dims);
    let mut whole = vec![0u8; dims.iter().product::<usize>() * elt];
    let zero = vec![0; dims.len()];
    for (p, piece) in pieces.iter().enumerate() {
        if piece.shape() != shard.as_slice() || piece.dtype() != dtype {
            return Err(Error::internal(
                "download",
                format!(
                    "piece {p} is {:?} {:?}, not {dtype:?} {shard:?}",
                    piece.dtype(),
                    piece.shape()
                ),
            ));
        }
        let block = s.block(p, dims);
        let at: Vec<usize> = block.iter().map(|b| b.0).collect();
        let extent: Vec<usize> = block.iter().map(|b| b.1).collect();
        let bytes = piece.to_bytes();
        crate::ir::sharding::copy_block(&bytes, &shard, &zero, &mut whole, dims, &at, &extent, elt);
    }
    Ok(HostArray::from_bytes(dtype, dims, &whole))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;

    #[test]
    fn pieces_round_trip() {
        let s = Sharding::new(vec![2, 2], 1, vec![0, 1, 2, 3]).unwrap();
        let data: Vec<u8> = (0..9i32).flat_map(i32::to_ne_bytes).collect();
        let host = HostArray::from_bytes(DType::I32, &[3, 3], &data);
        let pieces: Vec<HostArray> = (0..4).map(|p| piece(&host, &s, p)).collect();
        assert!(pieces.iter().all(|p| p.shape() == [2, 2]));
        let whole = assemble(&pieces, &[3, 3], &s).unwrap();
        assert_eq!(whole.to_bytes(), data);
    }
}
