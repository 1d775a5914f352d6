//! Convolutions (`conv1d`, `conv2d`, `conv_transpose2d`, the nn layers)
//! against naive host loops written here from PyTorch's definitions:
//! values with stride, padding, dilation and groups (depthwise included),
//! gradients of input, weight and bias against finite differences of the
//! host loops, a dynamic batch compiled once, and misuse messages.

mod common;

use common::{assert_close, assert_close64, panic_message};
use lazyxla::nn::{Conv1d, Conv2d, ConvTranspose2d, Module};
use lazyxla::optim::{Optimizer, Sgd};
use lazyxla::{mark_step, metrics, DType, Tensor};

/// Pseudo-random values in [-1, 1), multiples of 1/64 (exact in f32).
fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) % 128) as f64 / 64.0 - 1.0
        })
        .collect()
}

/// A 2-d convolution's settings (1-d ones use a height of 1).
#[derive(Clone, Copy, Debug)]
struct Cfg {
    stride: (usize, usize),
    padding: (usize, usize),
    dilation: (usize, usize),
    groups: usize,
}

const PLAIN: Cfg = Cfg {
    stride: (1, 1),
    padding: (0, 0),
    dilation: (1, 1),
    groups: 1,
};

/// PyTorch's conv2d, as loops: `x [n, c, h, w]`, `w [o, c/g, kh, kw]`.
fn host_conv(
    x: &[f64],
    xs: [usize; 4],
    w: &[f64],
    ws: [usize; 4],
    c: Cfg,
) -> (Vec<f64>, [usize; 4]) {
    let [n, ci, h, wd] = xs;
    let [o, cg, kh, kw] = ws;
    let oh = (h + 2 * c.padding.0 - c.dilation.0 * (kh - 1) - 1) / c.stride.0 + 1;
    let ow = (wd + 2 * c.padding.1 - c.dilation.1 * (kw - 1) - 1) / c.stride.1 + 1;
    let og = o / c.groups;
    let mut out = vec![0.0; n * o * oh * ow];
    for b in 0..n {
        for oc in 0..o {
            for y in 0..oh {
                for xx in 0..ow {
                    let mut acc = 0.0;
                    for i in 0..cg {
                        let ch = oc / og * cg + i;
                        for p in 0..kh {
                            for q in 0..kw {
                                let iy =
                                    (y * c.stride.0 + p * c.dilation.0) as i64 - c.padding.0 as i64;
                                let ix = (xx * c.stride.1 + q * c.dilation.1) as i64
                                    - c.padding.1 as i64;
                                if iy < 0 || ix < 0 || iy >= h as i64 || ix >= wd as i64 {
                                    continue;
                                }
                                let xv = x[((b * ci + ch) * h + iy as usize) * wd + ix as usize];
                                acc += xv * w[((oc * cg + i) * kh + p) * kw + q];
                            }
                        }
                    }
                    out[((b * o + oc) * oh + y) * ow + xx] = acc;
                }
            }
        }
    }
    (out, [n, o, oh, ow])
}

/// PyTorch's conv_transpose2d, as loops (each input element scatters the
/// kernel): `x [n, c, h, w]`, `w [c, o/g, kh, kw]`.
fn host_conv_t(
    x: &[f64],
    xs: [usize; 4],
    w: &[f64],
    ws: [usize; 4],
    c: Cfg,
    extra: (usize, usize),
) -> (Vec<f64>, [usize; 4]) {
    let [n, ci, h, wd] = xs;
    let [_, og, kh, kw] = ws;
    let o = og * c.groups;
    let cg = ci / c.groups;
    let oh = (h - 1) * c.stride.0 + c.dilation.0 * (kh - 1) + extra.0 + 1 - 2 * c.padding.0;
    let ow = (wd - 1) * c.stride.1 + c.dilation.1 * (kw - 1) + extra.1 + 1 - 2 * c.padding.1;
    let mut out = vec![0.0; n * o * oh * ow];
    for b in 0..n {
        for ch in 0..ci {
            for y in 0..h {
                for xx in 0..wd {
                    let v = x[((b * ci + ch) * h + y) * wd + xx];
                    for j in 0..og {
                        let oc = ch / cg * og + j;
                        for p in 0..kh {
                            for q in 0..kw {
                                let oy =
                                    (y * c.stride.0 + p * c.dilation.0) as i64 - c.padding.0 as i64;
                                let ox = (xx * c.stride.1 + q * c.dilation.1) as i64
                                    - c.padding.1 as i64;
                                if oy < 0 || ox < 0 || oy >= oh as i64 || ox >= ow as i64 {
                                    continue;
                                }
                                out[((b * o + oc) * oh + oy as usize) * ow + ox as usize] +=
                                    v * w[((ch * og + j) * kh + p) * kw + q];
                            }
                        }
                    }
                }
            }
        }
    }
    (out, [n, o, oh, ow])
}

fn f32t(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.iter().map(|&a| a as f32).collect(), shape).unwrap()
}

fn f64t(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape).unwrap()
}

fn f32s(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&a| a as f32).collect()
}

/// Adds `bias [o]` to `y [n, o, ..]` on the host.
fn add_bias(y: &mut [f64], o: usize, spatial: usize, bias: &[f64]) {
    for (k, v) in y.iter_mut().enumerate() {
        *v += bias[k / spatial % o];
    }
}

fn check_conv2d(xs: [usize; 4], ws: [usize; 4], c: Cfg, with_bias: bool) {
    let x = data(xs.iter().product(), 1);
    let w = data(ws.iter().product(), 2);
    let b = data(ws[0], 3);
    let (mut want, shape) = host_conv(&x, xs, &w, ws, c);
    if with_bias {
        add_bias(&mut want, shape[1], shape[2] * shape[3], &b);
    }
    let bt = f32t(&b, &[ws[0]]);
    let y = f32t(&x, &xs).conv2d(
        &f32t(&w, &ws),
        with_bias.then_some(&bt),
        c.stride,
        c.padding,
        c.dilation,
        c.groups,
    );
    assert_eq!(y.upper_bounds(), shape.to_vec(), "{c:?}");
    assert_close(&y.to_vec::<f32>().unwrap(), &f32s(&want), 1e-5);
}

backend_test! {
    fn conv2d_matches_the_host_loops() {
        check_conv2d([2, 3, 5, 6], [4, 3, 3, 2], PLAIN, true);
        let strided = Cfg { stride: (2, 3), padding: (1, 2), ..PLAIN };
        check_conv2d([2, 3, 7, 8], [2, 3, 3, 3], strided, false);
        let dilated = Cfg { dilation: (2, 1), padding: (2, 0), ..PLAIN };
        check_conv2d([1, 2, 6, 5], [3, 2, 3, 2], dilated, true);
        let grouped = Cfg { groups: 2, stride: (2, 1), padding: (1, 1), ..PLAIN };
        check_conv2d([2, 4, 5, 5], [6, 2, 3, 3], grouped, true);
        // Depthwise: one group per channel, two filters each.
        let depthwise = Cfg { groups: 3, padding: (1, 1), ..PLAIN };
        check_conv2d([2, 3, 4, 4], [6, 1, 3, 3], depthwise, true);
        // A 1x1 kernel with padding larger than the kernel.
        check_conv2d([1, 2, 3, 3], [2, 2, 1, 1], Cfg { padding: (2, 1), ..PLAIN }, false);
        // Unbatched [C, H, W] in, [O, H', W'] out.
        let x = data(2 * 3 * 4, 14);
        let w = data(3 * 2 * 2 * 2, 15);
        let (want, _) = host_conv(&x, [1, 2, 3, 4], &w, [3, 2, 2, 2], PLAIN);
        let y = f32t(&x, &[2, 3, 4]).conv2d(&f32t(&w, &[3, 2, 2, 2]), None, (1, 1), (0, 0), (1, 1), 1);
        assert_eq!(y.upper_bounds(), vec![3, 2, 3]);
        assert_close(&y.to_vec::<f32>().unwrap(), &f32s(&want), 1e-5);
        // f64 in, f64 out.
        let x = data(2 * 9, 4);
        let w = data(4, 5);
        let (want, _) = host_conv(&x, [1, 2, 3, 3], &w, [1, 2, 1, 2], PLAIN);
        let y = f64t(&x, &[1, 2, 3, 3]).conv2d(&f64t(&w, &[1, 2, 1, 2]), None, (1, 1), (0, 0), (1, 1), 1);
        assert_eq!(y.dtype(), DType::F64);
        assert_close64(&y.to_vec::<f64>().unwrap(), &want, 1e-12);
    }
}

backend_test! {
    fn conv1d_matches_the_host_loops_and_takes_unbatched_input() {
        for (c, ws) in [
            (PLAIN, [4, 3, 1, 3]),
            (Cfg { stride: (1, 2), padding: (0, 2), dilation: (1, 2), groups: 1 }, [2, 3, 1, 3]),
            (Cfg { groups: 3, padding: (0, 1), ..PLAIN }, [3, 1, 1, 3]),
        ] {
            let x = data(2 * 3 * 9, 6);
            let w = data(ws.iter().product(), 7);
            let b = data(ws[0], 8);
            let (mut want, shape) = host_conv(&x, [2, 3, 1, 9], &w, ws, c);
            add_bias(&mut want, shape[1], shape[3], &b);
            let y = f32t(&x, &[2, 3, 9]).conv1d(
                &f32t(&w, &[ws[0], ws[1], ws[3]]),
                Some(&f32t(&b, &[ws[0]])),
                c.stride.1,
                c.padding.1,
                c.dilation.1,
                c.groups,
            );
            assert_eq!(y.upper_bounds(), vec![2, shape[1], shape[3]]);
            assert_close(&y.to_vec::<f32>().unwrap(), &f32s(&want), 1e-5);
        }
        // Unbatched [C, L] in, [O, L'] out.
        let x = data(2 * 5, 9);
        let w = data(2 * 2 * 2, 10);
        let (want, _) = host_conv(&x, [1, 2, 1, 5], &w, [2, 2, 1, 2], PLAIN);
        let y = f32t(&x, &[2, 5]).conv1d(&f32t(&w, &[2, 2, 2]), None, 1, 0, 1, 1);
        assert_eq!(y.upper_bounds(), vec![2, 4]);
        assert_close(&y.to_vec::<f32>().unwrap(), &f32s(&want), 1e-5);
    }
}

backend_test! {
    fn conv_transpose2d_matches_the_host_loops() {
        let cases = [
            ([1, 2, 3, 3], [2, 3, 3, 3], PLAIN, (0, 0)),
            ([2, 2, 3, 4], [2, 2, 3, 3], Cfg { stride: (2, 2), padding: (1, 1), ..PLAIN }, (1, 0)),
            ([1, 4, 3, 3], [4, 1, 2, 3], Cfg { stride: (2, 1), groups: 2, ..PLAIN }, (1, 0)),
            ([1, 2, 4, 3], [2, 2, 3, 2], Cfg { dilation: (2, 1), padding: (1, 0), stride: (1, 3), groups: 1 }, (1, 2)),
        ];
        for (xs, ws, c, extra) in cases {
            let x = data(xs.iter().product(), 11);
            let w = data(ws.iter().product(), 12);
            let b = data(ws[1] * c.groups, 13);
            let (mut want, shape) = host_conv_t(&x, xs, &w, ws, c, extra);
            add_bias(&mut want, shape[1], shape[2] * shape[3], &b);
            let y = f32t(&x, &xs).conv_transpose2d(
                &f32t(&w, &ws),
                Some(&f32t(&b, &[shape[1]])),
                c.stride,
                c.padding,
                extra,
                c.dilation,
                c.groups,
            );
            assert_eq!(y.upper_bounds(), shape.to_vec(), "{c:?} {extra:?}");
            assert_close(&y.to_vec::<f32>().unwrap(), &f32s(&want), 1e-5);
        }
    }
}

/// The gradient of `sum(r * f(p))` with respect to `p`, by central
/// differences of the host function `f` (linear in `p`, so exact up to
/// rounding), weighted by `r` = 0.5, 0.6, ...
fn host_grad(p: &[f64], f: impl Fn(&[f64]) -> Vec<f64>) -> Vec<f64> {
    let loss = |q: &[f64]| -> f64 {
        f(q).iter()
            .enumerate()
            .map(|(i, v)| v * (0.5 + 0.1 * i as f64))
            .sum()
    };
    (0..p.len())
        .map(|i| {
            let (mut a, mut b) = (p.to_vec(), p.to_vec());
            a[i] += 0.5;
            b[i] -= 0.5;
            loss(&a) - loss(&b)
        })
        .collect()
}

/// Backward of `sum(r * y)` through lazyxla, in f64: gradients of x, w, b.
fn lazy_grads(
    x: &[f64],
    xs: &[usize],
    w: &[f64],
    ws: &[usize],
    b: &[f64],
    f: impl Fn(&Tensor, &Tensor, &Tensor) -> Tensor,
) -> [Vec<f64>; 3] {
    let xt = f64t(x, xs).requires_grad(true);
    let wt = f64t(w, ws).requires_grad(true);
    let bt = f64t(b, &[b.len()]).requires_grad(true);
    let y = f(&xt, &wt, &bt).flatten();
    let r = Tensor::arange_sym(&y.size(0)).to_dtype(DType::F64) * 0.1 + 0.5;
    (&y * &r).sum().backward();
    mark_step().unwrap();
    [&xt, &wt, &bt].map(|t| t.grad().expect("a gradient").to_vec::<f64>().unwrap())
}

fn check_conv2d_grads(xs: [usize; 4], ws: [usize; 4], c: Cfg) {
    let (x, w, b) = (
        data(xs.iter().product(), 21),
        data(ws.iter().product(), 22),
        data(ws[0], 23),
    );
    let host = |x: &[f64], w: &[f64], b: &[f64]| {
        let (mut y, s) = host_conv(x, xs, w, ws, c);
        add_bias(&mut y, s[1], s[2] * s[3], b);
        y
    };
    let got = lazy_grads(&x, &xs, &w, &ws, &b, |x, w, b| {
        x.conv2d(w, Some(b), c.stride, c.padding, c.dilation, c.groups)
    });
    assert_close64(&got[0], &host_grad(&x, |p| host(p, &w, &b)), 1e-9);
    assert_close64(&got[1], &host_grad(&w, |p| host(&x, p, &b)), 1e-9);
    assert_close64(&got[2], &host_grad(&b, |p| host(&x, &w, p)), 1e-9);
}

backend_test! {
    fn conv2d_gradients_match_finite_differences() {
        check_conv2d_grads([2, 2, 4, 5], [3, 2, 2, 3], PLAIN);
        // Stride that skips the last row and column, padding, dilation.
        check_conv2d_grads([1, 2, 6, 7], [2, 2, 2, 3], Cfg { stride: (2, 3), padding: (1, 0), dilation: (2, 1), groups: 1 });
        // Groups (the weight gradient uses batch groups), padding > kernel.
        check_conv2d_grads([2, 4, 4, 3], [6, 2, 2, 1], Cfg { groups: 2, padding: (1, 2), stride: (1, 2), ..PLAIN });
        // Depthwise.
        check_conv2d_grads([1, 3, 4, 4], [3, 1, 3, 3], Cfg { groups: 3, padding: (1, 1), ..PLAIN });
    }
}

backend_test! {
    fn conv1d_and_conv_transpose2d_gradients_match_finite_differences() {
        let c = Cfg { stride: (1, 2), padding: (0, 1), dilation: (1, 2), groups: 2 };
        let (x, w, b) = (data(2 * 4 * 9, 31), data(4 * 2 * 3, 32), data(4, 33));
        let host = |x: &[f64], w: &[f64], b: &[f64]| {
            let (mut y, s) = host_conv(x, [2, 4, 1, 9], w, [4, 2, 1, 3], c);
            add_bias(&mut y, s[1], s[3], b);
            y
        };
        let got = lazy_grads(&x, &[2, 4, 9], &w, &[4, 2, 3], &b, |x, w, b| x.conv1d(w, Some(b), 2, 1, 2, 2));
        assert_close64(&got[0], &host_grad(&x, |p| host(p, &w, &b)), 1e-9);
        assert_close64(&got[1], &host_grad(&w, |p| host(&x, p, &b)), 1e-9);
        assert_close64(&got[2], &host_grad(&b, |p| host(&x, &w, p)), 1e-9);

        // Transposed, with stride, output padding and groups: its gradients
        // are convolutions with lhs dilation and batch groups in turn.
        let c = Cfg { stride: (2, 2), padding: (1, 0), groups: 2, dilation: (1, 2) };
        check_conv_transpose2d_grads([2, 4, 3, 3], [4, 1, 3, 2], c, (1, 1));
        // Without groups the weight gradient slides the output gradient
        // over the input (`weight_grad_over_dilated_input`): stride, kernel
        // dilation, padding and output padding all enter its window.
        let c = Cfg { stride: (2, 3), padding: (1, 1), groups: 1, dilation: (2, 1) };
        check_conv_transpose2d_grads([2, 3, 3, 2], [3, 2, 3, 2], c, (1, 2));
    }
}

/// `conv_transpose2d`'s gradients for every operand against central
/// differences of the host loops.
fn check_conv_transpose2d_grads(xs: [usize; 4], ws: [usize; 4], c: Cfg, extra: (usize, usize)) {
    let (x, w, b) = (
        data(xs.iter().product(), 34),
        data(ws.iter().product(), 35),
        data(ws[1] * c.groups, 36),
    );
    let host = |x: &[f64], w: &[f64], b: &[f64]| {
        let (mut y, s) = host_conv_t(x, xs, w, ws, c, extra);
        add_bias(&mut y, s[1], s[2] * s[3], b);
        y
    };
    let got = lazy_grads(&x, &xs, &w, &ws, &b, |x, w, b| {
        x.conv_transpose2d(w, Some(b), c.stride, c.padding, extra, c.dilation, c.groups)
    });
    assert_close64(&got[0], &host_grad(&x, |p| host(p, &w, &b)), 1e-9);
    assert_close64(&got[1], &host_grad(&w, |p| host(&x, p, &b)), 1e-9);
    assert_close64(&got[2], &host_grad(&b, |p| host(&x, &w, p)), 1e-9);
}

backend_test! {
    fn a_dynamic_batch_compiles_once() {
        let (ws, c) = ([4, 2, 3, 3], Cfg { stride: (2, 1), padding: (1, 1), groups: 2, ..PLAIN });
        let w = data(ws.iter().product(), 51);
        let wt = f32t(&w, &ws).requires_grad(true);
        let b = data(4, 50);
        let bt = f32t(&b, &[4]).requires_grad(true);
        for (step, n) in [2usize, 5, 1, 3].into_iter().enumerate() {
            let xs = [n, 4, 5, 4];
            let x = data(xs.iter().product(), 52 + step as u64);
            let xt = f32t(&x, &xs).mark_dynamic(0, 6);
            let y = xt.conv2d(&wt, Some(&bt), c.stride, c.padding, c.dilation, c.groups);
            assert_eq!(y.size(0).to_string(), "<=6");
            if step == 0 {
                let ir = lazyxla::debug::ir_text(&[&y]);
                let op = "f32[s0<=6, 4, 3, 4] = convolution[stride=[2, 1] padding=[(1, 1), (1, 1)] lhs_dilation=[1, 1] rhs_dilation=[1, 1] groups=2]";
                assert!(ir.contains(op), "{ir}");
            }
            let t = y.conv_transpose2d(&f32t(&w, &ws), None, (1, 1), (0, 0), (0, 0), (1, 1), 1);
            let loss = y.sum();
            loss.backward();
            mark_step().unwrap();
            let (mut want, _) = host_conv(&x, xs, &w, ws, c);
            add_bias(&mut want, 4, 12, &b);
            assert_close(&y.to_vec::<f32>().unwrap(), &f32s(&want), 1e-5);
            assert_eq!(t.concrete_shape().unwrap()[0], n);
            // d sum(y) / db: the number of outputs per channel.
            assert_eq!(bt.grad().unwrap().to_vec::<f32>().unwrap(), vec![12.0 * n as f32; 4]);
            bt.zero_grad();
            // d sum(y) / dw: for each weight, the sum of the inputs it meets.
            let got = wt.grad().unwrap().to_vec::<f32>().unwrap();
            let host = host_grad(&w, |p| {
                let (y, _) = host_conv(&x, xs, p, ws, c);
                // host_grad weighs by 0.5 + 0.1 i; undo that for a plain sum.
                y.iter().enumerate().map(|(i, v)| v / (0.5 + 0.1 * i as f64)).collect()
            });
            assert_close(&got, &f32s(&host), 1e-4);
            wt.zero_grad();
        }
        assert_eq!(metrics::counter("UncachedCompile"), 1, "{}", metrics::report());
    }
}

backend_test! {
    fn misuse_names_the_op_and_shapes() {
        let x = Tensor::zeros(&[2, 3, 5, 5], DType::F32);
        let w = Tensor::zeros(&[4, 2, 3, 3], DType::F32);
        let m = panic_message(|| { x.conv2d(&w, None, (1, 1), (0, 0), (1, 1), 1); });
        assert!(m.contains("conv2d") && m.contains("3 channels") && m.contains("[4, 2, 3, 3]"), "{m}");
        let m = panic_message(|| { x.conv2d(&Tensor::zeros(&[4, 1, 3, 3], DType::F32), None, (1, 1), (0, 0), (1, 1), 2); });
        assert!(m.contains("conv2d") && m.contains("groups 2 must divide"), "{m}");
        let m = panic_message(|| { x.conv2d(&Tensor::zeros(&[4, 3, 6, 3], DType::F32), None, (1, 1), (0, 0), (1, 1), 1); });
        assert!(m.contains("conv2d") && m.contains("does not fit") && m.contains("[2, 3, 5, 5]"), "{m}");
        let m = panic_message(|| { x.conv2d(&Tensor::zeros(&[4, 3, 3, 3], DType::F32), None, (1, 1), (0, 0), (3, 1), 1); });
        assert!(m.contains("dilation 3"), "{m}");
        let m = panic_message(|| { x.conv2d(&Tensor::zeros(&[4, 3, 3, 3], DType::F32), None, (0, 1), (0, 0), (1, 1), 1); });
        assert!(m.contains("conv2d") && m.contains("at least 1"), "{m}");
        let m = panic_message(|| { x.conv1d(&w, None, 1, 0, 1, 1); });
        assert!(m.contains("conv1d") && m.contains("3-d input"), "{m}");
        let m = panic_message(|| { x.conv2d(&Tensor::zeros(&[4, 3, 3, 3], DType::F32), Some(&Tensor::zeros(&[3], DType::F32)), (1, 1), (0, 0), (1, 1), 1); });
        assert!(m.contains("bias must be [4]"), "{m}");
        let xi = Tensor::zeros(&[2, 3, 5, 5], DType::I64);
        let m = panic_message(|| { xi.conv2d(&xi, None, (1, 1), (0, 0), (1, 1), 1); });
        assert!(m.contains("conv2d") && m.contains("float"), "{m}");
        // A dynamic dimension other than the batch.
        let v = Tensor::ones(&[1, 1, 4, 4], DType::F32).mark_dynamic(2, 6);
        let m = panic_message(|| { v.conv2d(&Tensor::ones(&[1, 1, 1, 1], DType::F32), None, (1, 1), (0, 0), (1, 1), 1); });
        assert!(m.contains("conv2d") && m.contains("dynamic dimension 2") && m.contains("<=6") && m.contains("pad_to_bound(fill)"), "{m}");
        // conv_transpose2d: the weight is [in, out/groups, ..].
        let m = panic_message(|| { x.conv_transpose2d(&w, None, (1, 1), (0, 0), (0, 0), (1, 1), 1); });
        assert!(m.contains("conv_transpose2d") && m.contains("3 channels") && m.contains("[in, out/groups"), "{m}");
        let wt = Tensor::zeros(&[3, 2, 3, 3], DType::F32);
        let m = panic_message(|| { x.conv_transpose2d(&wt, None, (2, 2), (0, 0), (2, 0), (1, 1), 1); });
        assert!(m.contains("conv_transpose2d") && m.contains("output padding 2"), "{m}");
        // The runtime stays usable.
        let y = x.conv_transpose2d(&wt, None, (2, 2), (0, 0), (1, 0), (1, 1), 1);
        assert_eq!(y.upper_bounds(), vec![2, 2, 12, 11]);
        assert_eq!(y.sum().item::<f32>().unwrap(), 0.0);
    }
}

backend_test! {
    fn layers_initialise_like_pytorch_and_train() {
        let conv = Conv2d::new(4, 6, (3, 2), 7).groups(2).padding((1, 0));
        assert_eq!(conv.weight.upper_bounds(), vec![6, 2, 3, 2]);
        assert_eq!(conv.parameters().len(), 2);
        let bound = 1.0 / (12f32).sqrt();
        let wv = conv.weight.to_vec::<f32>().unwrap();
        assert!(wv.iter().all(|v| v.abs() <= bound) && wv.iter().any(|v| v.abs() > bound / 2.0), "{wv:?}");
        let bv = conv.bias.as_ref().unwrap().to_vec::<f32>().unwrap();
        assert!(bv.len() == 6 && bv.iter().all(|v| v.abs() <= bound));
        // Same seed, same parameters; a layer equals the functional op.
        let again = Conv2d::new(4, 6, (3, 2), 7).groups(2).padding((1, 0));
        assert_eq!(again.weight.to_vec::<f32>().unwrap(), wv);
        let x = f32t(&data(2 * 4 * 5 * 5, 61), &[2, 4, 5, 5]);
        let direct = x.conv2d(&conv.weight, conv.bias.as_ref(), (1, 1), (1, 0), (1, 1), 2);
        assert_eq!(conv.forward(&x).to_vec::<f32>().unwrap(), direct.to_vec::<f32>().unwrap());
        assert!(Conv2d::new(4, 6, (3, 3), 0).bias(false).bias.is_none());
        let c1 = Conv1d::new(3, 2, 4, 1).stride(2).dilation(2);
        assert_eq!(c1.forward(&Tensor::ones(&[1, 3, 16], DType::F32)).upper_bounds(), vec![1, 2, 5]);
        let up = ConvTranspose2d::new(6, 4, (2, 2), 3).groups(2).stride((2, 2));
        assert_eq!(up.weight.upper_bounds(), vec![6, 2, 2, 2]);
        assert!(up.weight.to_vec::<f32>().unwrap().iter().all(|v| v.abs() <= 0.5));
        assert_eq!(up.forward(&Tensor::ones(&[1, 6, 3, 3], DType::F32)).upper_bounds(), vec![1, 4, 6, 6]);
        let m = panic_message(|| { Conv2d::new(4, 6, (3, 3), 0).groups(4); });
        assert!(m.contains("Conv2d") && m.contains("groups 4"), "{m}");

        // A conv, then a transposed conv back to the input's size, fit to
        // a target: the loss falls and the step compiles once.
        let enc = Conv2d::new(2, 4, (3, 3), 1).stride((2, 2)).padding((1, 1));
        let dec = ConvTranspose2d::new(4, 2, (3, 3), 2).stride((2, 2)).padding((1, 1)).output_padding((1, 1));
        let mut params = enc.parameters();
        params.extend(dec.parameters());
        let mut opt = Sgd::new(params, 0.1);
        let x = f32t(&data(2 * 2 * 6 * 6, 62), &[2, 2, 6, 6]);
        let target = Tensor::full(&[2, 2, 6, 6], 0.5, DType::F32);
        mark_step().unwrap(); // the target becomes data, as in every step after
        metrics::reset();
        let mut losses = Vec::new();
        for _ in 0..20 {
            opt.zero_grad();
            let y = dec.forward(&enc.forward(&x).relu());
            let loss = (&y - &target).square().mean();
            loss.backward();
            opt.step();
            mark_step().unwrap();
            losses.push(loss.item::<f32>().unwrap());
        }
        assert!(losses[19] < 0.7 * losses[0], "{losses:?}");
        assert_eq!(metrics::counter("UncachedCompile"), 1, "{}", metrics::report());
    }
}
