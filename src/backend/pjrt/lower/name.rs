//! SSA names: `%v12`, `%arg0`, and `%v7#1` for one result of an op with
//! several.
//!
//! A name is a few integers, copied with each value and written out only
//! when the emitter writes an operand: a lowering makes one name a value
//! and reads each several times (operands, padding and backing maps), so
//! names neither allocate nor hash strings.

use std::fmt;

/// An SSA value's name in a lowered function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Name {
    /// The op's number (`%v<id>`) or the argument's (`%arg<id>`).
    id: u32,
    arg: bool,
    /// Which result of an op with several (`#k`), `None` for an op with
    /// one result and for arguments.
    result: Option<u32>,
}

impl Name {
    /// `%v<id>`.
    pub fn value(id: usize) -> Name {
        Name {
            id: small(id),
            arg: false,
            result: None,
        }
    }

    /// `%arg<k>`.
    pub fn arg(k: usize) -> Name {
        Name {
            id: small(k),
            arg: true,
            result: None,
        }
    }

    /// Result `i` of this op, which has `n` results: `%v7#i`, or the op's
    /// own name when it has one result.
    pub fn result(self, n: usize, i: usize) -> Name {
        match n {
            1 => self,
            _ => Name {
                result: Some(small(i)),
                ..self
            },
        }
    }

    /// The name appended to `s`.
    pub fn push_to(self, s: &mut String) {
        let mut buf = itoa::Buffer::new();
        s.push_str(if self.arg { "%arg" } else { "%v" });
        s.push_str(buf.format(self.id));
        if let Some(k) = self.result {
            s.push('#');
            s.push_str(buf.format(k));
        }
    }
}

/// `n` as a name's number: a function has far fewer than 2^32 values
/// (each is a line of text).
fn small(n: usize) -> u32 {
    u32::try_from(n).expect("fewer than 2^32 values in a function")
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::with_capacity(12);
        self.push_to(&mut s);
        f.write_str(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::Name;

    #[test]
    fn names_are_written_as_mlir_spells_them() {
        assert_eq!(Name::value(12).to_string(), "%v12");
        assert_eq!(Name::arg(0).to_string(), "%arg0");
        assert_eq!(Name::value(7).result(2, 1).to_string(), "%v7#1");
        assert_eq!(Name::value(7).result(1, 0).to_string(), "%v7");
    }
}
