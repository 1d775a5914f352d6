//! Window ops: max/avg/adaptive pooling and cumulative sums and products,
//! against naive host computations, with their gradients and dynamic
//! sizes (a dynamic batch compiles once; a scan along a `[<=N]` selection
//! never reads its padding).

mod common;

use common::{assert_close, panic_message};
use lazyxla::nn::{AdaptiveAvgPool2d, AvgPool2d, MaxPool2d, Module};
use lazyxla::{metrics, DType, Tensor};

/// Deterministic values with ties (multiples of 0.5 in [-4, 4)).
fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s % 16) as f32 - 8.0) * 0.5
        })
        .collect()
}

/// A pooling configuration over NCHW.
#[derive(Clone, Copy)]
struct Pool {
    shape: [usize; 4],
    kernel: (usize, usize),
    stride: (usize, usize),
    padding: (usize, usize),
}

impl Pool {
    fn out(&self) -> (usize, usize) {
        let o = |n: usize, k: usize, s: usize, p: usize| (n + 2 * p - k) / s + 1;
        (
            o(self.shape[2], self.kernel.0, self.stride.0, self.padding.0),
            o(self.shape[3], self.kernel.1, self.stride.1, self.padding.1),
        )
    }

    /// For each output element (NCHW row-major), the flat input positions
    /// its window reads, row-major, padding left out.
    fn windows(&self) -> Vec<Vec<usize>> {
        let [n, c, h, w] = self.shape;
        let (oh, ow) = self.out();
        let mut all = Vec::new();
        for b in 0..n * c {
            for i in 0..oh {
                for j in 0..ow {
                    let mut win = Vec::new();
                    for di in 0..self.kernel.0 {
                        for dj in 0..self.kernel.1 {
                            let y = (i * self.stride.0 + di) as i64 - self.padding.0 as i64;
                            let x = (j * self.stride.1 + dj) as i64 - self.padding.1 as i64;
                            if y >= 0 && x >= 0 && (y as usize) < h && (x as usize) < w {
                                win.push(b * h * w + y as usize * w + x as usize);
                            }
                        }
                    }
                    all.push(win);
                }
            }
        }
        all
    }

    fn max(&self, x: &[f32]) -> Vec<f32> {
        self.windows()
            .iter()
            .map(|w| w.iter().map(|&i| x[i]).fold(f32::NEG_INFINITY, f32::max))
            .collect()
    }

    fn avg(&self, x: &[f32]) -> Vec<f32> {
        let area = (self.kernel.0 * self.kernel.1) as f32;
        self.windows()
            .iter()
            .map(|w| w.iter().map(|&i| x[i]).sum::<f32>() / area)
            .collect()
    }

    /// The gradient of `sum(max_pool(x) * g)`: each window's `g` to its
    /// first maximum.
    fn max_grad(&self, x: &[f32], g: &[f32]) -> Vec<f32> {
        let mut out = vec![0.0; x.len()];
        for (o, w) in self.windows().iter().enumerate() {
            let first = *w
                .iter()
                .reduce(|a, b| if x[*b] > x[*a] { b } else { a })
                .unwrap();
            out[first] += g[o];
        }
        out
    }

    fn avg_grad(&self, x_len: usize, g: &[f32]) -> Vec<f32> {
        let area = (self.kernel.0 * self.kernel.1) as f32;
        let mut out = vec![0.0; x_len];
        for (o, w) in self.windows().iter().enumerate() {
            for &i in w {
                out[i] += g[o] / area;
            }
        }
        out
    }
}

const POOLS: [Pool; 3] = [
    Pool {
        shape: [2, 3, 5, 6],
        kernel: (3, 2),
        stride: (2, 1),
        padding: (1, 1),
    },
    Pool {
        shape: [1, 2, 4, 4],
        kernel: (2, 2),
        stride: (2, 2),
        padding: (0, 0),
    },
    Pool {
        shape: [1, 1, 7, 5],
        kernel: (3, 3),
        stride: (3, 2),
        padding: (1, 0),
    },
];

backend_test! {
    fn max_and_avg_pooling_match_host_windows() {
        for (k, p) in POOLS.iter().enumerate() {
            let n: usize = p.shape.iter().product();
            let v = data(n, k as u64);
            let x = Tensor::from_vec(v.clone(), &p.shape).unwrap();
            let (oh, ow) = p.out();
            let m = x.max_pool2d(p.kernel, p.stride, p.padding);
            assert_eq!(m.upper_bounds(), vec![p.shape[0], p.shape[1], oh, ow]);
            assert_close(&m.to_vec::<f32>().unwrap(), &p.max(&v), 0.0);
            let a = x.avg_pool2d(p.kernel, p.stride, p.padding);
            assert_close(&a.to_vec::<f32>().unwrap(), &p.avg(&v), 1e-6);
            // CHW works as PyTorch's unbatched input.
            let chw = x.reshape(&[-1, p.shape[2] as i64, p.shape[3] as i64]);
            let m3 = chw.max_pool2d(p.kernel, p.stride, p.padding);
            assert_eq!(m3.to_vec::<f32>().unwrap(), m.to_vec::<f32>().unwrap());
        }
    }
}

backend_test! {
    fn max_pooling_of_integers_pads_with_the_lowest_value() {
        let x = Tensor::from_vec(vec![-5i64, -7, -9, -2], &[1, 1, 2, 2]).unwrap();
        let y = x.max_pool2d((2, 2), (1, 1), (1, 1));
        assert_eq!(y.to_vec::<i64>().unwrap(), vec![-5, -5, -7, -5, -2, -2, -9, -2, -2]);
    }
}

/// PyTorch's adaptive windows, by their start/end rule.
fn adaptive_host(v: &[f32], shape: [usize; 4], out: (usize, usize)) -> Vec<f32> {
    let [n, c, h, w] = shape;
    let mut r = Vec::new();
    for b in 0..n * c {
        for i in 0..out.0 {
            let (y0, y1) = (i * h / out.0, ((i + 1) * h).div_ceil(out.0));
            for j in 0..out.1 {
                let (x0, x1) = (j * w / out.1, ((j + 1) * w).div_ceil(out.1));
                let mut s = 0.0;
                for y in y0..y1 {
                    for x in x0..x1 {
                        s += v[b * h * w + y * w + x];
                    }
                }
                r.push(s / ((y1 - y0) * (x1 - x0)) as f32);
            }
        }
    }
    r
}

backend_test! {
    fn adaptive_avg_pooling_matches_the_start_end_rule() {
        for (shape, out) in [
            ([2, 2, 5, 7], (3, 4)),
            ([1, 3, 4, 6], (2, 3)),
            ([1, 1, 3, 3], (5, 2)),
            ([2, 1, 6, 6], (1, 1)),
        ] {
            let n: usize = shape.iter().product();
            let v = data(n, 7);
            let x = Tensor::from_vec(v.clone(), &shape).unwrap();
            let y = x.adaptive_avg_pool2d(out);
            assert_eq!(y.upper_bounds(), vec![shape[0], shape[1], out.0, out.1]);
            assert_close(&y.to_vec::<f32>().unwrap(), &adaptive_host(&v, shape, out), 1e-6);
        }
    }
}

/// Inclusive scans of a row-major `[a, b, c]` array along `dim`.
fn scan_host(v: &[f32], shape: [usize; 3], dim: usize, prod: bool) -> Vec<f32> {
    let mut out = v.to_vec();
    let strides = [shape[1] * shape[2], shape[2], 1];
    for i in 0..v.len() {
        let k = (i / strides[dim]) % shape[dim];
        if k > 0 {
            let prev = out[i - strides[dim]];
            out[i] = if prod { prev * v[i] } else { prev + v[i] };
        }
    }
    out
}

backend_test! {
    fn cumsum_and_cumprod_along_every_dim() {
        let shape = [3, 4, 2];
        let v: Vec<f32> = data(24, 3).iter().map(|x| x * 0.5 + 0.25).collect();
        let x = Tensor::from_vec(v.clone(), &shape).unwrap();
        for dim in 0..3 {
            let s = x.cumsum(dim);
            assert_eq!(s.upper_bounds(), shape.to_vec());
            assert_close(&s.to_vec::<f32>().unwrap(), &scan_host(&v, shape, dim, false), 1e-6);
            let p = x.cumprod(dim);
            assert_close(&p.to_vec::<f32>().unwrap(), &scan_host(&v, shape, dim, true), 1e-5);
        }
        assert_eq!(x.cumsum(-1).to_vec::<f32>().unwrap(), x.cumsum(2).to_vec::<f32>().unwrap());
        // Integers and bools scan in I64, as PyTorch.
        let i = Tensor::from_vec(vec![1i32, 2, 3, 4], &[4]).unwrap();
        assert_eq!(i.cumsum(0).dtype(), DType::I64);
        assert_eq!(i.cumsum(0).to_vec::<i64>().unwrap(), vec![1, 3, 6, 10]);
        assert_eq!(i.cumprod(0).to_vec::<i64>().unwrap(), vec![1, 2, 6, 24]);
        let b = Tensor::from_vec(vec![true, false, true], &[3]).unwrap();
        assert_eq!(b.cumsum(0).to_vec::<i64>().unwrap(), vec![1, 1, 2]);
        assert_eq!(Tensor::scalar(2.5f32).cumsum(0).item::<f32>().unwrap(), 2.5);
    }
}

backend_test! {
    fn max_pool_gradient_goes_to_the_first_maximum() {
        for (k, p) in POOLS.iter().enumerate() {
            let n: usize = p.shape.iter().product();
            let v = data(n, 11 + k as u64);
            let x = Tensor::from_vec(v.clone(), &p.shape).unwrap().requires_grad(true);
            let y = x.max_pool2d(p.kernel, p.stride, p.padding);
            let gv: Vec<f32> = (0..p.windows().len()).map(|i| 1.0 + i as f32).collect();
            let g = Tensor::from_vec(gv.clone(), &y.upper_bounds()).unwrap();
            (&y * &g).sum().backward();
            let got = x.grad().unwrap().to_vec::<f32>().unwrap();
            assert_close(&got, &p.max_grad(&v, &gv), 0.0);
        }
        // All ties: the first element of each window takes it all.
        let x = Tensor::from_vec(vec![1.0f32; 16], &[1, 1, 4, 4]).unwrap().requires_grad(true);
        x.max_pool2d((2, 2), (2, 2), (0, 0)).sum().backward();
        let got = x.grad().unwrap().to_vec::<f32>().unwrap();
        let mut want = vec![0.0; 16];
        for i in [0, 2, 8, 10] {
            want[i] = 1.0;
        }
        assert_eq!(got, want);
    }
}

backend_test! {
    fn max_pool_propagates_nan_and_routes_the_gradient_to_the_first_nan() {
        let n = f32::NAN;
        let x = Tensor::from_vec(vec![1.0, n, 3.0, n, 2.0, -1.0, 0.0, 5.0], &[1, 1, 2, 4])
            .unwrap()
            .requires_grad(true);
        let y = x.max_pool2d((2, 2), (2, 2), (0, 0));
        y.sum().backward();
        let got = y.to_vec::<f32>().unwrap();
        assert!(got[0].is_nan() && got[1].is_nan(), "{got:?}");
        let g = x.grad().unwrap().to_vec::<f32>().unwrap();
        assert_eq!(g, vec![0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
    }
}

backend_test! {
    fn avg_pool_gradient_spreads_over_each_window() {
        for (k, p) in POOLS.iter().enumerate() {
            let n: usize = p.shape.iter().product();
            let x = Tensor::from_vec(data(n, k as u64), &p.shape).unwrap().requires_grad(true);
            let y = x.avg_pool2d(p.kernel, p.stride, p.padding);
            let gv: Vec<f32> = (0..p.windows().len()).map(|i| 1.0 + i as f32).collect();
            let g = Tensor::from_vec(gv.clone(), &y.upper_bounds()).unwrap();
            (&y * &g).sum().backward();
            let got = x.grad().unwrap().to_vec::<f32>().unwrap();
            assert_close(&got, &p.avg_grad(n, &gv), 1e-6);
        }
    }
}

backend_test! {
    fn adaptive_pool_gradient_matches_finite_differences() {
        let shape = [1, 1, 5, 3];
        let v = data(15, 5);
        let f = |v: &[f32]| -> f32 {
            let x = Tensor::from_vec(v.to_vec(), &shape).unwrap();
            let w = Tensor::from_vec(vec![1.0f32, -2.0, 3.0, 0.5, 2.0, -1.0], &[1, 1, 3, 2]).unwrap();
            (&x.adaptive_avg_pool2d((3, 2)) * &w).sum().item::<f32>().unwrap()
        };
        let x = Tensor::from_vec(v.clone(), &shape).unwrap().requires_grad(true);
        let w = Tensor::from_vec(vec![1.0f32, -2.0, 3.0, 0.5, 2.0, -1.0], &[1, 1, 3, 2]).unwrap();
        (&x.adaptive_avg_pool2d((3, 2)) * &w).sum().backward();
        let got = x.grad().unwrap().to_vec::<f32>().unwrap();
        for i in 0..15 {
            let (mut hi, mut lo) = (v.clone(), v.clone());
            hi[i] += 0.25;
            lo[i] -= 0.25;
            let fd = (f(&hi) - f(&lo)) / 0.5;
            assert!((got[i] - fd).abs() < 1e-4, "element {i}: {} vs {fd}", got[i]);
        }
    }
}

backend_test! {
    fn scan_gradients_match_host_formulas() {
        let shape = [2, 3, 4];
        let v: Vec<f32> = data(24, 9).iter().map(|x| x * 0.5 + 1.25).collect();
        let gv: Vec<f32> = (0..24).map(|i| (i % 5) as f32 - 1.5).collect();
        let g = Tensor::from_vec(gv.clone(), &shape).unwrap();
        for dim in 0..3 {
            let x = Tensor::from_vec(v.clone(), &shape).unwrap().requires_grad(true);
            (&x.cumsum(dim) * &g).sum().backward();
            let got = x.grad().unwrap().to_vec::<f32>().unwrap();
            let y = Tensor::from_vec(v.clone(), &shape).unwrap().requires_grad(true);
            (&y.cumprod(dim) * &g).sum().backward();
            let got_prod = y.grad().unwrap().to_vec::<f32>().unwrap();
            // d/dx_j sum_i g_i prod_{k<=i} x_k = sum_{i>=j} g_i prod_{k<=i, k!=j} x_k.
            let strides = [12, 4, 1];
            let (mut want, mut want_prod) = (vec![0.0f32; 24], vec![0.0f32; 24]);
            for j in 0..24 {
                let kj = (j / strides[dim]) % shape[dim];
                for ki in kj..shape[dim] {
                    let i = j + (ki - kj) * strides[dim];
                    want[j] += gv[i];
                    let mut p = gv[i];
                    for kk in 0..=ki {
                        if kk != kj {
                            p *= v[j - kj * strides[dim] + kk * strides[dim]];
                        }
                    }
                    want_prod[j] += p;
                }
            }
            assert_close(&got, &want, 1e-6);
            assert_close(&got_prod, &want_prod, 1e-4);
        }
    }
}

backend_test! {
    fn pooling_on_a_dynamic_batch_compiles_once() {
        let mut compiles = Vec::new();
        for n in [2usize, 3, 4, 1] {
            let p = Pool { shape: [n, 2, 5, 4], kernel: (2, 3), stride: (2, 1), padding: (1, 1) };
            let v = data(n * 40, n as u64);
            let x = Tensor::from_vec(v.clone(), &p.shape)
                .unwrap()
                .mark_dynamic(0, 4)
                .requires_grad(true);
            let m = x.max_pool2d(p.kernel, p.stride, p.padding);
            let a = x.avg_pool2d(p.kernel, p.stride, p.padding);
            let c = x.adaptive_avg_pool2d((2, 3));
            assert_eq!(m.size(0).to_string(), "<=4");
            (m.sum() + a.sum() * 2.0 + c.sum()).backward();
            let grad = x.grad().unwrap();
            lazyxla::mark_step().unwrap();
            assert_eq!(m.concrete_shape().unwrap(), vec![n, 2, 3, 4]);
            assert_close(&m.to_vec::<f32>().unwrap(), &p.max(&v), 0.0);
            assert_close(&a.to_vec::<f32>().unwrap(), &p.avg(&v), 1e-6);
            let ones = vec![1.0; p.windows().len()];
            let want: Vec<f32> = p
                .max_grad(&v, &ones)
                .iter()
                .zip(p.avg_grad(v.len(), &ones))
                .map(|(m, a)| m + 2.0 * a)
                .collect();
            // The adaptive part ((5, 4) -> (2, 3)) adds 1/area per window.
            let ad = {
                let mut g = vec![0.0f32; v.len()];
                for b in 0..n * 2 {
                    for i in 0..2usize {
                        let (y0, y1) = (i * 5 / 2, ((i + 1) * 5).div_ceil(2));
                        for j in 0..3usize {
                            let (x0, x1) = (j * 4 / 3, ((j + 1) * 4).div_ceil(3));
                            let area = ((y1 - y0) * (x1 - x0)) as f32;
                            for y in y0..y1 {
                                for xx in x0..x1 {
                                    g[b * 20 + y * 4 + xx] += 1.0 / area;
                                }
                            }
                        }
                    }
                }
                g
            };
            let want: Vec<f32> = want.iter().zip(&ad).map(|(a, b)| a + b).collect();
            assert_close(&grad.to_vec::<f32>().unwrap(), &want, 1e-5);
            compiles.push(metrics::counter("UncachedCompile"));
        }
        assert_eq!(compiles[0], compiles[3], "{compiles:?}: {}", metrics::report());
    }
}

backend_test! {
    fn scans_along_a_masked_selection_never_read_padding() {
        let v = vec![2.0f32, -1.0, 0.5, 3.0, -2.0, 1.5, 0.0, 4.0];
        let x = Tensor::from_vec(v.clone(), &[8]).unwrap().requires_grad(true);
        let sel = x.masked_select(&x.gt_scalar(0.0)); // [<=8], 5 real
        let s = sel.cumsum(0);
        let p = sel.cumprod(-1);
        assert_eq!(s.size(0).to_string(), "<=8");
        (&s.sum() + &p.sum()).backward();
        let kept: Vec<f32> = v.iter().copied().filter(|&a| a > 0.0).collect();
        let want_s: Vec<f32> = kept.iter().scan(0.0, |a, &b| { *a += b; Some(*a) }).collect();
        let want_p: Vec<f32> = kept.iter().scan(1.0, |a, &b| { *a *= b; Some(*a) }).collect();
        assert_close(&s.to_vec::<f32>().unwrap(), &want_s, 1e-6);
        assert_close(&p.to_vec::<f32>().unwrap(), &want_p, 1e-6);
        // d/dsel_j: (n - j) from the sum; sum_{i>=j} prefix_prod_i / sel_j
        // from the product. Unselected elements get nothing.
        let n = kept.len();
        let mut want = vec![0.0f32; 8];
        let mut j = 0;
        for (k, &a) in v.iter().enumerate() {
            if a > 0.0 {
                want[k] = (n - j) as f32 + want_p[j..].iter().sum::<f32>() / a;
                j += 1;
            }
        }
        assert_close(&x.grad().unwrap().to_vec::<f32>().unwrap(), &want, 1e-5);
        // A scan of a 2-D zone along its static dim.
        let m = Tensor::stack(&[&sel, &(&sel * 2.0)], 1).cumsum(1); // [<=8, 2]
        let want_m: Vec<f32> = kept.iter().flat_map(|&a| [a, 3.0 * a]).collect();
        assert_close(&m.to_vec::<f32>().unwrap(), &want_m, 1e-6);
    }
}

backend_test! {
    fn pooling_rejects_dynamic_spatial_dims_and_bad_windows() {
        let x = Tensor::from_vec(data(32, 1), &[1, 2, 4, 4]).unwrap().mark_dynamic(2, 6);
        let msg = panic_message(|| {
            x.max_pool2d((2, 2), (2, 2), (0, 0));
        });
        assert!(msg.contains("max_pool2d") && msg.contains("pad_to_bound(fill)") && msg.contains("<=6"), "{msg}");
        let msg = panic_message(|| {
            x.adaptive_avg_pool2d((2, 2));
        });
        assert!(msg.contains("adaptive_avg_pool2d") && msg.contains("dynamic dimension 2"), "{msg}");
        let y = Tensor::zeros(&[1, 1, 4, 4], DType::F32);
        let msg = panic_message(|| {
            y.max_pool2d((2, 2), (2, 2), (2, 0));
        });
        assert!(msg.contains("at most half"), "{msg}");
        let msg = panic_message(|| {
            y.avg_pool2d((0, 2), (1, 1), (0, 0));
        });
        assert!(msg.contains("positive"), "{msg}");
        let msg = panic_message(|| {
            Tensor::zeros(&[4, 4], DType::F32).max_pool2d((2, 2), (2, 2), (0, 0));
        });
        assert!(msg.contains("3-D") && msg.contains("[4, 4]"), "{msg}");
        let msg = panic_message(|| {
            Tensor::zeros(&[1, 1, 4, 4], DType::I64).avg_pool2d((2, 2), (2, 2), (0, 0));
        });
        assert!(msg.contains("float"), "{msg}");
    }
}

backend_test! {
    fn pooling_modules_forward() {
        let x = Tensor::from_vec(data(2 * 3 * 6 * 6, 4), &[2, 3, 6, 6]).unwrap();
        let m = MaxPool2d::new((3, 3)).stride((2, 2)).padding((1, 1));
        assert_eq!(m.forward(&x).upper_bounds(), vec![2, 3, 3, 3]);
        assert!(m.parameters().is_empty());
        let a = AvgPool2d::new((2, 2));
        assert_eq!(
            a.forward(&x).to_vec::<f32>().unwrap(),
            x.avg_pool2d((2, 2), (2, 2), (0, 0)).to_vec::<f32>().unwrap()
        );
        let g = AdaptiveAvgPool2d::new((1, 1)).forward(&x);
        let mean = x.mean_dims(&[2, 3], true);
        assert_close(&g.to_vec::<f32>().unwrap(), &mean.to_vec::<f32>().unwrap(), 1e-6);
    }
}

#[test]
fn the_printer_shows_windows_and_their_gradients() {
    let _g = common::lock();
    lazyxla::Device::reference().scoped(|| {
        let x = Tensor::from_vec(data(16, 2), &[1, 1, 4, 4])
            .unwrap()
            .requires_grad(true);
        let y = x.max_pool2d((2, 2), (2, 1), (1, 0));
        y.sum().backward();
        insta::assert_snapshot!(
            "max_pool2d_and_gradient",
            lazyxla::debug::ir_text(&[&y, &x.grad().unwrap()])
        );
        let v = Tensor::from_vec(vec![1.0f32, -2.0, 3.0], &[3]).unwrap();
        let s = v.masked_select(&v.gt_scalar(0.0)).cumsum(0);
        insta::assert_snapshot!("cumsum_in_a_zone", lazyxla::debug::ir_text(&[&s]));
    });
}

backend_test! {
    fn long_scans_and_their_gradients() {
        let n = 3000usize;
        let x = Tensor::arange(n as i64).to_dtype(DType::F64).requires_grad(true);
        let s = x.cumsum(0);
        (&s * 1.0).sum().backward();
        let v = s.to_vec::<f64>().unwrap();
        assert_eq!(v[n - 1], (n * (n - 1) / 2) as f64);
        assert_eq!(v[10], 55.0);
        // d(sum(cumsum(x)))/dx_i = n - i: a scan from the end.
        let g = x.grad().unwrap().to_vec::<f64>().unwrap();
        assert_eq!((g[0], g[1], g[n - 1]), (n as f64, (n - 1) as f64, 1.0));
    }
}

backend_test! {
    fn a_pooling_net_trains_on_variable_batches_with_one_compile() {
        use lazyxla::optim::{Optimizer, Sgd};
        // Images whose target is the mean of their top-left quarter.
        let net = lazyxla::nn::Sequential::new()
            .add(MaxPool2d::new((2, 2)).stride((1, 1)).padding((1, 1)))
            .add(AvgPool2d::new((2, 2)))
            .add(AdaptiveAvgPool2d::new((2, 2)));
        let head = lazyxla::nn::Linear::new(4, 1, 3);
        let mut opt = Sgd::new(head.parameters(), 0.01);
        let mut losses = Vec::new();
        for step in 0..24u64 {
            let n = 1 + (step as usize * 5) % 8;
            let v = data(n * 36, step);
            let y: Vec<f32> = (0..n)
                .map(|b| (0..9).map(|i| v[b * 36 + (i / 3) * 6 + i % 3]).sum::<f32>() / 9.0)
                .collect();
            let x = Tensor::from_vec(v, &[n, 1, 6, 6]).unwrap().mark_dynamic(0, 8);
            let y = Tensor::from_vec(y, &[n, 1]).unwrap().mark_dynamic_as(0, &x, 0);
            opt.zero_grad();
            let features = net.forward(&x).reshape(&[-1, 4]);
            let loss = lazyxla::nn::mse_loss(&head.forward(&features), &y);
            loss.backward();
            opt.step();
            lazyxla::mark_step().unwrap();
            losses.push(loss.item::<f32>().unwrap());
        }
        assert_eq!(metrics::counter("UncachedCompile"), 1, "{}", metrics::report());
        let mean = |s: &[f32]| s.iter().sum::<f32>() / s.len() as f32;
        assert!(mean(&losses[18..]) < mean(&losses[..6]), "{losses:?}");
    }
}
