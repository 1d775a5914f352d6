//! `std::ops` operators on tensors: `+ - * /` with tensors, `f64` and
//! `i64` on either side (an `i64` keeps an integer tensor's dtype, as a
//! Python int does), and unary `-`.

use super::broadcast::Rhs;
use super::Tensor;
use crate::dtype::DType;
use crate::ir::BinaryOp;

macro_rules! tensor_binop {
    ($trait:ident, $method:ident, $op:expr) => {
        impl std::ops::$trait<&Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                self.binary($op, Rhs::Tensor(rhs))
            }
        }
        impl std::ops::$trait<Tensor> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                self.binary($op, Rhs::Tensor(&rhs))
            }
        }
        impl std::ops::$trait<&Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                self.binary($op, Rhs::Tensor(rhs))
            }
        }
        impl std::ops::$trait<Tensor> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                self.binary($op, Rhs::Tensor(&rhs))
            }
        }
        impl std::ops::$trait<f64> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: f64) -> Tensor {
                self.binary($op, Rhs::Scalar(rhs, DType::F64))
            }
        }
        impl std::ops::$trait<f64> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: f64) -> Tensor {
                self.binary($op, Rhs::Scalar(rhs, DType::F64))
            }
        }
        impl std::ops::$trait<i64> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: i64) -> Tensor {
                self.binary($op, Rhs::Scalar(rhs as f64, DType::I64))
            }
        }
        impl std::ops::$trait<i64> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: i64) -> Tensor {
                self.binary($op, Rhs::Scalar(rhs as f64, DType::I64))
            }
        }
    };
}

tensor_binop!(Add, add, BinaryOp::Add);
tensor_binop!(Sub, sub, BinaryOp::Sub);
tensor_binop!(Mul, mul, BinaryOp::Mul);
tensor_binop!(Div, div, BinaryOp::Div);

macro_rules! scalar_lhs {
    ($t:ty, $dt:expr) => {
        impl std::ops::Add<&Tensor> for $t {
            type Output = Tensor;
            #[track_caller]
            fn add(self, rhs: &Tensor) -> Tensor {
                rhs.binary(BinaryOp::Add, Rhs::Scalar(self as f64, $dt))
            }
        }
        impl std::ops::Add<Tensor> for $t {
            type Output = Tensor;
            #[track_caller]
            fn add(self, rhs: Tensor) -> Tensor {
                rhs.binary(BinaryOp::Add, Rhs::Scalar(self as f64, $dt))
            }
        }
        impl std::ops::Mul<&Tensor> for $t {
            type Output = Tensor;
            #[track_caller]
            fn mul(self, rhs: &Tensor) -> Tensor {
                rhs.binary(BinaryOp::Mul, Rhs::Scalar(self as f64, $dt))
            }
        }
        impl std::ops::Mul<Tensor> for $t {
            type Output = Tensor;
            #[track_caller]
            fn mul(self, rhs: Tensor) -> Tensor {
                rhs.binary(BinaryOp::Mul, Rhs::Scalar(self as f64, $dt))
            }
        }
        impl std::ops::Sub<&Tensor> for $t {
            type Output = Tensor;
            #[track_caller]
            fn sub(self, rhs: &Tensor) -> Tensor {
                rhs.reversed(BinaryOp::Sub, self as f64, $dt)
            }
        }
        impl std::ops::Sub<Tensor> for $t {
            type Output = Tensor;
            #[track_caller]
            fn sub(self, rhs: Tensor) -> Tensor {
                rhs.reversed(BinaryOp::Sub, self as f64, $dt)
            }
        }
        impl std::ops::Div<&Tensor> for $t {
            type Output = Tensor;
            #[track_caller]
            fn div(self, rhs: &Tensor) -> Tensor {
                rhs.reversed(BinaryOp::Div, self as f64, $dt)
            }
        }
        impl std::ops::Div<Tensor> for $t {
            type Output = Tensor;
            #[track_caller]
            fn div(self, rhs: Tensor) -> Tensor {
                rhs.reversed(BinaryOp::Div, self as f64, $dt)
            }
        }
    };
}

scalar_lhs!(f64, DType::F64);
scalar_lhs!(i64, DType::I64);

impl std::ops::Neg for &Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        Tensor::neg(self)
    }
}

impl std::ops::Neg for Tensor {
    type Output = Tensor;
    #[track_caller]
    fn neg(self) -> Tensor {
        Tensor::neg(&self)
    }
}
