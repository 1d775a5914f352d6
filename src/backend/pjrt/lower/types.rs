//! Element and tensor types of the StableHLO text, bounded types
//! included (`tensor<?x2xf32, #stablehlo.bounds<6, ?>>`).

use crate::dtype::DType;
use crate::ir::PadFill;
use smallvec::SmallVec;

/// An element type.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Elt {
    I1,
    I32,
    I64,
    U32,
    F16,
    BF16,
    F32,
    F64,
}

impl Elt {
    pub fn of(d: DType) -> Elt {
        match d {
            DType::Bool => Elt::I1,
            DType::I32 => Elt::I32,
            DType::I64 => Elt::I64,
            DType::F16 => Elt::F16,
            DType::BF16 => Elt::BF16,
            DType::F32 => Elt::F32,
            DType::F64 => Elt::F64,
        }
    }

    pub fn mlir(self) -> &'static str {
        match self {
            Elt::I1 => "i1",
            Elt::I32 => "i32",
            Elt::I64 => "i64",
            Elt::U32 => "ui32",
            Elt::F16 => "f16",
            Elt::BF16 => "bf16",
            Elt::F32 => "f32",
            Elt::F64 => "f64",
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Elt::F16 | Elt::BF16 | Elt::F32 | Elt::F64)
    }

    /// The signed integer type of the same width, for bitwise work on a
    /// value's bits; none for bool and half types.
    pub fn bits_twin(self) -> Option<Elt> {
        match self {
            Elt::F32 | Elt::I32 | Elt::U32 => Some(Elt::I32),
            Elt::F64 | Elt::I64 => Some(Elt::I64),
            Elt::I1 | Elt::F16 | Elt::BF16 => None,
        }
    }

    pub fn is_half(self) -> bool {
        matches!(self, Elt::F16 | Elt::BF16)
    }

    /// The `compare_type` for comparisons of this element type.
    pub(super) fn compare_type(self) -> &'static str {
        match self {
            Elt::F16 | Elt::BF16 | Elt::F32 | Elt::F64 => "FLOAT",
            Elt::U32 | Elt::I1 => "UNSIGNED",
            Elt::I32 | Elt::I64 => "SIGNED",
        }
    }

    /// A literal of this type for `v`, converted with Rust's `as`
    /// semantics (what `HostArray::full` does). Floats are written as bit
    /// patterns so that no value is rounded by the text.
    pub fn literal(self, v: f64) -> String {
        match self {
            Elt::I1 => if v != 0.0 { "true" } else { "false" }.into(),
            Elt::I32 => (v as i32).to_string(),
            Elt::I64 => (v as i64).to_string(),
            Elt::U32 => (v as u32).to_string(),
            Elt::F16 => format!("0x{:04X}", half::f16::from_f64(v).to_bits()),
            Elt::BF16 => format!("0x{:04X}", half::bf16::from_f64(v).to_bits()),
            Elt::F32 => format!("0x{:08X}", (v as f32).to_bits()),
            Elt::F64 => format!("0x{:016X}", v.to_bits()),
        }
    }

    /// The lowest value (identity of max).
    pub fn lowest(self) -> String {
        match self {
            Elt::I1 => "false".into(),
            Elt::I32 => i32::MIN.to_string(),
            Elt::I64 => i64::MIN.to_string(),
            Elt::U32 => "0".into(),
            Elt::F16 | Elt::BF16 | Elt::F32 | Elt::F64 => self.literal(f64::NEG_INFINITY),
        }
    }

    /// The MLIR literal of `fill` in this type.
    pub fn fill(self, fill: PadFill) -> String {
        match fill {
            PadFill::Zero => self.literal(0.0),
            PadFill::One => self.literal(1.0),
            PadFill::Lowest => self.lowest(),
            PadFill::Highest => self.highest(),
        }
    }

    /// The highest value (identity of min).
    pub fn highest(self) -> String {
        match self {
            Elt::I1 => "true".into(),
            Elt::I32 => i32::MAX.to_string(),
            Elt::I64 => i64::MAX.to_string(),
            Elt::U32 => u32::MAX.to_string(),
            Elt::F16 | Elt::BF16 | Elt::F32 | Elt::F64 => self.literal(f64::INFINITY),
        }
    }
}

/// A tensor type: element type, dimensions (the bound for a dynamic one)
/// and which dimensions are dynamic.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Ty {
    pub elt: Elt,
    pub dims: Dims,
    pub dynamic: SmallVec<[bool; 6]>,
}

/// A type's dimensions: inline up to rank 6, as nearly every value's are
/// (a lowering clones types often; they should not allocate).
pub(crate) type Dims = SmallVec<[i64; 6]>;

impl Ty {
    /// A static type.
    pub fn fixed(elt: Elt, dims: &[i64]) -> Ty {
        Ty {
            elt,
            dims: dims.into(),
            dynamic: smallvec::smallvec![false; dims.len()],
        }
    }

    /// A scalar type.
    pub fn scalar(elt: Elt) -> Ty {
        Ty::fixed(elt, &[])
    }

    /// The same shape (and dynamism) with another element type.
    pub fn with_elt(&self, elt: Elt) -> Ty {
        Ty {
            elt,
            ..self.clone()
        }
    }

    /// The static type of the bound shape.
    pub fn bound(&self) -> Ty {
        Ty::fixed(self.elt, &self.dims)
    }

    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    pub fn is_dynamic(&self) -> bool {
        self.dynamic.iter().any(|&d| d)
    }

    /// The number of elements of the bound shape.
    pub fn numel(&self) -> i64 {
        self.dims.iter().product()
    }

    /// The MLIR spelling.
    pub fn mlir(&self) -> String {
        let mut s = String::with_capacity(32);
        self.push_to(&mut s);
        s
    }

    /// Appends the MLIR spelling to `s`: `tensor<2x?xf32,
    /// #stablehlo.bounds<?, 6>>`. The emitter writes two or three types
    /// an op, so this skips `fmt`'s machinery.
    pub fn push_to(&self, s: &mut String) {
        let mut buf = itoa::Buffer::new();
        s.push_str("tensor<");
        for (&d, &dy) in self.dims.iter().zip(&self.dynamic) {
            if dy {
                s.push_str("?x");
            } else {
                s.push_str(buf.format(d));
                s.push('x');
            }
        }
        s.push_str(self.elt.mlir());
        if self.is_dynamic() {
            s.push_str(", #stablehlo.bounds<");
            for (k, (&d, &dy)) in self.dims.iter().zip(&self.dynamic).enumerate() {
                if k > 0 {
                    s.push_str(", ");
                }
                if dy {
                    s.push_str(buf.format(d));
                } else {
                    s.push('?');
                }
            }
            s.push('>');
        }
        s.push('>');
    }
}

impl Clone for Ty {
    // By slice copies: the derived clone goes element by element, and the
    // lowering clones a type for nearly every value it reads.
    fn clone(&self) -> Ty {
        Ty {
            elt: self.elt,
            dims: SmallVec::from_slice(&self.dims),
            dynamic: SmallVec::from_slice(&self.dynamic),
        }
    }
}

impl std::fmt::Display for Ty {
    /// The MLIR spelling ([`Ty::push_to`]).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.mlir())
    }
}
