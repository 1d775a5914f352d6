//! The serialized `xla.CompileOptionsProto` a compile takes: how many
//! replicas and partitions run the program and on which devices,
//! hand-encoded in protobuf's wire format (no protobuf dependency).
//!
//! Field 3, `executable_build_options` (`ExecutableBuildOptionsProto`):
//!
//! ```text
//! 1  device_ordinal          varint  -1 (the client picks)
//! 4  num_replicas            varint  N in replica mode, else 1 (required)
//! 5  num_partitions          varint  N in partition mode, else 1 (required)
//! 6  use_spmd_partitioning   varint  1 in partition mode
//! 9  device_assignment       bytes   xla.DeviceAssignmentProto, optional
//! 23 process_count           varint  1
//! ```
//!
//! `DeviceAssignmentProto`: `replica_count` (1), `computation_count` (2,
//! the partitions), then per partition one `computation_devices` (3)
//! holding the packed `replica_device_ids` (1): the device id of each
//! replica. XLA copies proto fields verbatim, so an absent count means 0,
//! and with empty options both CPU plugins abort the process on a CHECK:
//! the counts are always written. XLA obeys these options, not the
//! module's `mhlo.num_replicas` attribute.
//!
//! Field 7, `env_option_overrides` (map from a `DebugOptions` field name
//! to an `OptionOverrideProto`, whose field 1 is a string value), holds
//! [`XLA_WORKAROUNDS`]. The client applies each override on top of the
//! debug options it takes from `XLA_FLAGS` (`ApplyAllOptionOverrides`),
//! so every other option keeps XLA's default. Setting field 3's own
//! `debug_options` instead would replace all of them with proto zeros
//! (optimization level 0 among them).
//!
//! A device assignment that names a device twice aborts the process
//! inside `PJRT_Client_Compile` (measured on both CPU plugins), so
//! [`CompileOptions::validate`] checks every assignment against the
//! client's devices first.

use super::PjrtError;

/// Debug options every compile overrides, each working around an XLA bug
/// that aborts the process in the plugins lazyxla supports.
///
/// `while-loop-trip-count-annotator` reads the literal of a loop
/// counter's step without checking that the step is a constant, and
/// aborts on a CHECK when it is not (openxla/xla#47384, fixed upstream by
/// openxla/xla#47846 after both supported CPU plugins were built). A
/// random program of the differential fuzzer hit it once. The pass only
/// attaches a counted loop's trip count to it as a hint; without it the
/// loop evaluates its condition each iteration and computes the same
/// (`tests/pjrt_ffi.rs` checks both, on whichever plugin it loads). A
/// user's own `--xla_disable_hlo_passes` in `XLA_FLAGS` is kept.
pub const XLA_WORKAROUNDS: &[(&str, &str)] =
    &[("xla_disable_hlo_passes", "while-loop-trip-count-annotator")];

/// How a program is compiled: its replica and partition counts and,
/// optionally, the device of each (replica, partition).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileOptions {
    replicas: usize,
    partitions: usize,
    spmd: bool,
    /// Device ids, `assignment[partition][replica]`.
    assignment: Option<Vec<Vec<i64>>>,
    /// `allow_spmd_sharding_propagation_to_output = [true]`: XLA chooses
    /// the shardings of results left unannotated.
    propagate_to_outputs: bool,
    /// Whether [`XLA_WORKAROUNDS`] are written (always, but for the test
    /// that shows they take effect).
    workarounds: bool,
}

impl Default for CompileOptions {
    fn default() -> CompileOptions {
        CompileOptions::replicas(1)
    }
}

impl CompileOptions {
    /// `n` replicas of one partition each (replica mode: every replica
    /// runs the same per-device program; collectives name replicas),
    /// placed by the client on its first `n` devices.
    pub fn replicas(n: usize) -> CompileOptions {
        CompileOptions {
            replicas: n,
            partitions: 1,
            spmd: false,
            assignment: None,
            propagate_to_outputs: false,
            workarounds: true,
        }
    }

    /// `n` partitions of one replica, SPMD partitioning on (partition
    /// mode: arguments and results carry `mhlo.sharding` annotations).
    pub fn partitions(n: usize) -> CompileOptions {
        CompileOptions {
            replicas: 1,
            partitions: n,
            spmd: true,
            assignment: None,
            propagate_to_outputs: false,
            workarounds: true,
        }
    }

    /// Lets XLA choose the shardings of the results the module leaves
    /// unannotated (field 12, `allow_spmd_sharding_propagation_to_output`,
    /// as JAX and PyTorch/XLA set it); read them back from the optimized
    /// module (`Executable::optimized_program`).
    pub fn propagating_to_outputs(mut self) -> CompileOptions {
        self.propagate_to_outputs = true;
        self
    }

    /// Leaves out [`XLA_WORKAROUNDS`], so XLA runs its default passes (to
    /// show, in a test, what the workarounds change).
    #[doc(hidden)]
    pub fn without_workarounds(mut self) -> CompileOptions {
        self.workarounds = false;
        self
    }

    /// Places replica `r` on the device with id `ids[r]` (replica mode);
    /// in partition mode, partition `p` on `ids[p]`.
    pub fn on_devices(mut self, ids: &[i64]) -> CompileOptions {
        self.assignment = Some(if self.partitions == 1 {
            vec![ids.to_vec()]
        } else {
            ids.iter().map(|&id| vec![id]).collect()
        });
        self
    }

    /// The number of replicas.
    pub fn replica_count(&self) -> usize {
        self.replicas
    }

    /// The number of partitions.
    pub fn partition_count(&self) -> usize {
        self.partitions
    }

    /// The number of devices the program runs on at once.
    pub fn device_count(&self) -> usize {
        self.replicas * self.partitions
    }

    /// The device ids in launch order (replica-major within partition
    /// 0, then partition by partition), if an assignment was given.
    pub fn assigned(&self) -> Option<Vec<i64>> {
        let a = self.assignment.as_ref()?;
        if self.partitions == 1 {
            Some(a[0].clone())
        } else {
            Some(a.iter().map(|p| p[0]).collect())
        }
    }

    /// Checks the options against a client whose addressable devices have
    /// the ids `device_ids`: at least one replica and partition, no more
    /// devices than the client has, and an assignment (when given) of the
    /// right size naming distinct devices of the client. A compile with
    /// options that fail this could abort the process.
    pub fn validate(&self, device_ids: &[i64]) -> Result<(), PjrtError> {
        let want = self.device_count();
        let have = device_ids.len();
        if self.replicas == 0 || self.partitions == 0 {
            return Err(PjrtError::local(format!(
                "a program needs at least one replica and one partition, not {} replicas and {} partitions",
                self.replicas, self.partitions
            )));
        }
        if want > have {
            return Err(PjrtError::local(format!(
                "{want} devices are needed ({} replicas x {} partitions) but the client has {have}; \
                 ask for at most {have} (`lazyxla::set_cpu_device_count` or LAZYXLA_CPU_DEVICES sets the CPU plugin's count)",
                self.replicas, self.partitions
            )));
        }
        let Some(ids) = self.assigned() else {
            return Ok(());
        };
        if ids.len() != want {
            return Err(PjrtError::local(format!(
                "the device assignment names {} devices for {want} ({} replicas x {} partitions); name one device per replica",
                ids.len(),
                self.replicas,
                self.partitions
            )));
        }
        for (i, id) in ids.iter().enumerate() {
            if !device_ids.contains(id) {
                return Err(PjrtError::local(format!(
                    "the device assignment names device {id}, which the client does not have (its {have} devices are {device_ids:?})"
                )));
            }
            if ids[..i].contains(id) {
                let distinct = {
                    let mut d = ids.clone();
                    d.sort_unstable();
                    d.dedup();
                    d.len()
                };
                return Err(PjrtError::local(format!(
                    "the device assignment {ids:?} names device {id} twice: {want} replicas need {want} distinct devices, it names {distinct}"
                )));
            }
        }
        Ok(())
    }

    /// The serialized `CompileOptionsProto`.
    pub fn encode(&self) -> Vec<u8> {
        self.encode_with(std::env::var("XLA_FLAGS").ok())
    }

    /// [`encode`](Self::encode) with `xla_flags` as the user's `XLA_FLAGS`.
    fn encode_with(&self, xla_flags: Option<String>) -> Vec<u8> {
        let mut build = Vec::new();
        // device_ordinal = -1: int64 varints of negative numbers take 10 bytes.
        varint_field(&mut build, 1, -1i64 as u64);
        varint_field(&mut build, 4, self.replicas as u64);
        varint_field(&mut build, 5, self.partitions as u64);
        if self.spmd {
            varint_field(&mut build, 6, 1);
        }
        if let Some(a) = &self.assignment {
            let mut da = Vec::new();
            varint_field(&mut da, 1, self.replicas as u64);
            varint_field(&mut da, 2, self.partitions as u64);
            for partition in a {
                let mut packed = Vec::new();
                for &id in partition {
                    varint(&mut packed, id as u64);
                }
                let mut cd = Vec::new();
                bytes_field(&mut cd, 1, &packed);
                bytes_field(&mut da, 3, &cd);
            }
            bytes_field(&mut build, 9, &da);
        }
        if self.propagate_to_outputs {
            // A packed repeated bool: one `true` for the whole result.
            bytes_field(&mut build, 12, &[1]);
        }
        varint_field(&mut build, 23, 1);
        let mut out = Vec::new();
        bytes_field(&mut out, 3, &build);
        if self.workarounds {
            for (name, value) in XLA_WORKAROUNDS {
                let value = with_user_flag(name, value, xla_flags.clone());
                let mut value_proto = Vec::new();
                bytes_field(&mut value_proto, 1, value.as_bytes());
                let mut entry = Vec::new();
                bytes_field(&mut entry, 1, name.as_bytes());
                bytes_field(&mut entry, 2, &value_proto);
                bytes_field(&mut out, 7, &entry);
            }
        }
        out
    }
}

/// `value` for the list option `name`, followed by the values the user
/// gave it in `XLA_FLAGS` (`--name=a,b`): an override replaces the whole
/// list, so the user's entries are kept by repeating them.
fn with_user_flag(name: &str, value: &str, xla_flags: Option<String>) -> String {
    let prefix = format!("--{name}=");
    let mut out = value.to_string();
    for flag in xla_flags.iter().flat_map(|f| f.split_whitespace()) {
        if let Some(user) = flag.strip_prefix(&prefix) {
            for v in user.split(',').map(str::trim).filter(|v| !v.is_empty()) {
                out.push(',');
                out.push_str(v);
            }
        }
    }
    out
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_field(out: &mut Vec<u8>, field: u64, v: u64) {
    varint(out, field << 3);
    varint(out, v);
}

fn bytes_field(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    varint(out, (field << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// The bytes measured to work on both CPU plugins
    /// (`reference/xla-multi-device.md`), then the workarounds' map entry.
    #[test]
    fn encodes_the_measured_bytes() {
        let bare = |o: CompileOptions| hex(&o.without_workarounds().encode());
        assert_eq!(
            bare(CompileOptions::replicas(1)),
            "1a1208ffffffffffffffffff0120012801b80101"
        );
        assert_eq!(
            bare(CompileOptions::replicas(4)),
            "1a1208ffffffffffffffffff0120042801b80101"
        );
        assert_eq!(
            bare(CompileOptions::replicas(4).on_devices(&[3, 2, 1, 0])),
            "1a2008ffffffffffffffffff01200428014a0c080410011a060a0403020100b80101"
        );
        assert_eq!(
            bare(CompileOptions::partitions(4)),
            "1a1408ffffffffffffffffff01200128043001b80101"
        );
        // Field 12 as JAX writes it: tag 0x62, one packed `true`.
        assert_eq!(
            bare(CompileOptions::partitions(4).propagating_to_outputs()),
            "1a1708ffffffffffffffffff01200128043001620101b80101"
        );
        // Field 7: one map entry (tag 0x3a, 59 bytes), key (field 1) the
        // option's name, value (field 2) an `OptionOverrideProto` whose
        // `string_field` (1) is the pass's name.
        let entry = format!(
            "3a3b0a16{}12210a1f{}",
            hex(b"xla_disable_hlo_passes"),
            hex(b"while-loop-trip-count-annotator")
        );
        assert_eq!(
            hex(&CompileOptions::replicas(1).encode_with(None)),
            format!("1a1208ffffffffffffffffff0120012801b80101{entry}")
        );
    }

    #[test]
    fn the_user_s_disabled_passes_are_kept() {
        let pass = "while-loop-trip-count-annotator";
        let name = "xla_disable_hlo_passes";
        assert_eq!(with_user_flag(name, pass, None), pass);
        let flags = "--xla_dump_to=/tmp/x --xla_disable_hlo_passes=a,b  --other=1".to_string();
        assert_eq!(
            with_user_flag(name, pass, Some(flags)),
            format!("{pass},a,b")
        );
    }

    #[test]
    fn validation_names_both_counts() {
        let ids = [0, 1, 2, 3];
        assert!(CompileOptions::replicas(4).validate(&ids).is_ok());
        let e = CompileOptions::replicas(8).validate(&ids).unwrap_err();
        assert!(
            e.message.contains("8 devices") && e.message.contains("has 4"),
            "{e}"
        );
        let e = CompileOptions::replicas(4)
            .on_devices(&[0, 1, 0, 1])
            .validate(&ids)
            .unwrap_err();
        assert!(
            e.message
                .contains("4 replicas need 4 distinct devices, it names 2"),
            "{e}"
        );
        let e = CompileOptions::replicas(2)
            .on_devices(&[0, 7])
            .validate(&ids)
            .unwrap_err();
        assert!(e.message.contains("device 7"), "{e}");
        let e = CompileOptions::replicas(2)
            .on_devices(&[0])
            .validate(&ids)
            .unwrap_err();
        assert!(e.message.contains("names 1 devices for 2"), "{e}");
        assert!(CompileOptions::replicas(0).validate(&ids).is_err());
    }
}
