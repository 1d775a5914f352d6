//! DESIGN.md's table of dynamic-shape support and the runtime agree: every
//! op listed as supporting dynamic inputs runs on one, every op listed
//! as "static dims only" rejects a dynamic dim with the error that names
//! the op and suggests `pad_to_bound(fill)` or `materialize()`, and every
//! op listed as "static operands: reduce first" (the collectives) rejects
//! a dynamic operand with the error that says to reduce the dynamic dims
//! first or `pad_to_bound(fill)`.

mod common;

use lazyxla::Tensor;
use std::collections::BTreeMap;

/// Rows of the table: op names (from the first column) -> support.
fn table() -> BTreeMap<String, String> {
    let design =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/DESIGN.md")).unwrap();
    let start = design
        .find("### Dynamic-shape support by op")
        .expect("the table's heading");
    let mut rows = BTreeMap::new();
    for line in design[start..].lines().skip(4) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        for name in cells[1].split(['`', ',', ' ', '(', ')', '*']).filter(|s| {
            s.starts_with(|c: char| c.is_ascii_lowercase())
                && s.chars()
                    .all(|c| c == '_' || c.is_ascii_lowercase() || c.is_ascii_digit())
        }) {
            rows.insert(name.to_string(), cells[2].to_string());
        }
    }
    rows
}

/// Applies `op` to a dynamic input (a masked selection of 6 values, shaped
/// `[<=6]` or `[<=6, 2]`).
fn apply(op: &str) -> Option<()> {
    let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0, 0.5, -1.0, 4.0], &[6]).unwrap();
    let v = x.masked_select(&x.gt_scalar(0.0)); // [<=6]
    let m = Tensor::stack(&[&v, &v.exp()], 1); // [<=6, 2]
    let idx = v.gt_scalar(1.0).nonzero().flatten(); // [<=6] indices into v
    let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    let out = match op {
        "elementwise" | "add" | "where_cond" | "to_dtype" | "unary" => {
            (&v + &v.exp()).to_dtype(lazyxla::DType::F64)
        }
        "sum" | "mean" | "max" | "min" => {
            m.sum_dims(&[0], false) + m.mean() + m.max_dims(&[1], false).sum() + m.min()
        }
        "argmax" | "argmin" => (m.argmax(0) + m.argmin(1).sum()).to_dtype(lazyxla::DType::F32),
        "matmul" => m.matmul(&w) + m.transpose(0, 1).matmul(&m).sum(),
        "reshape" | "flatten" | "unsqueeze" => m.flatten().unsqueeze(0).reshape(&[-1, 2]).sum(),
        "squeeze" => v.squeeze(0).sum(),
        "permute" | "transpose" => m.permute(&[1, 0]).transpose(0, 1).sum(),
        "expand" => v.unsqueeze(1).expand(&[v.size(0), 3.into()]).sum(),
        "cat" | "stack" => Tensor::cat(&[&v, &v], 0).sum() + Tensor::stack(&[&v, &v], 0).sum(),
        "index_select" | "gather" => {
            v.index_select(0, &idx).sum()
                + m.gather(1, &m.ge_scalar(1e9).to_dtype(lazyxla::DType::I64))
                    .sum()
        }
        "softmax" | "log_softmax" => m.softmax(1).sum() + m.log_softmax(0).sum(),
        "nonzero" | "masked_select" | "unique" | "unique_with_counts" => {
            v.nonzero().to_dtype(lazyxla::DType::F32).sum()
                + v.masked_select(&v.gt_scalar(1.0)).sum()
                + v.unique().sum()
                + v.unique_with_counts().1.to_dtype(lazyxla::DType::F32).sum()
        }
        "arange_sym" | "zeros_sym" | "ones_sym" | "full_sym" | "reshape_sym" => {
            let n = v.size(0);
            Tensor::arange_sym(&(n.clone() - 1))
                .to_dtype(lazyxla::DType::F32)
                .sum()
                + Tensor::zeros_sym(&[n.clone(), 2.into()], lazyxla::DType::F32).sum()
                + Tensor::ones_sym(std::slice::from_ref(&n), lazyxla::DType::F32).sum()
                + Tensor::full_sym(std::slice::from_ref(&n), 2.0, lazyxla::DType::F32).sum()
                + m.reshape_sym(&[2.into(), n]).sum()
        }
        "conv1d" | "conv2d" | "conv_transpose2d" => {
            // A dynamic batch of 2-channel signals of length 1 (and 1x1 images).
            let x = m.unsqueeze(2);
            let w = Tensor::ones(&[3, 2, 1], lazyxla::DType::F32);
            let img = x.unsqueeze(3);
            let wt = Tensor::ones(&[2, 3, 1, 1], lazyxla::DType::F32);
            x.conv1d(&w, None, 1, 0, 1, 1).sum()
                + img
                    .conv2d(&w.unsqueeze(3), None, (1, 1), (0, 0), (1, 1), 1)
                    .sum()
                + img
                    .conv_transpose2d(&wt, None, (2, 1), (0, 0), (1, 0), (1, 1), 1)
                    .sum()
        }
        "sort" | "argsort" | "topk" => {
            v.sort(0, true).0.sum()
                + m.argsort(0, false).to_dtype(lazyxla::DType::F32).sum()
                + v.topk(1, 0, false).0.sum()
                + m.topk(1, 1, true).0.sum()
        }
        "scatter" | "scatter_add" => {
            let i = v.argsort(0, false);
            v.zeros_like().scatter(0, &i, &v).sum()
                + v.zeros_like().scatter_add(0, &i.zeros_like(), &v).sum()
        }
        "max_pool2d" | "avg_pool2d" | "adaptive_avg_pool2d" => {
            // The dynamic dim as the batch of `1 x 2` images.
            let x = m.unsqueeze(1).unsqueeze(1); // [<=6, 1, 1, 2]
            x.max_pool2d((1, 2), (1, 1), (0, 1)).sum()
                + x.avg_pool2d((1, 2), (1, 2), (0, 1)).sum()
                + x.adaptive_avg_pool2d((1, 3)).sum()
        }
        "cumsum" | "cumprod" => v.cumsum(0).sum() + m.cumprod(0).sum() + m.cumsum(1).sum(),
        "scaled_dot_product_attention" => {
            // One batch of <=6 tokens attending causally, then with the
            // keys masked by their values.
            let q = m.unsqueeze(0);
            let keep = v.gt_scalar(1.0);
            lazyxla::nn::scaled_dot_product_attention(&q, &q, &q, None, true).sum()
                + lazyxla::nn::scaled_dot_product_attention(&q, &q, &q, Some(&keep), false).sum()
        }
        "clamp_min" | "clamp_max" | "clamp_tensor" | "silu" | "leaky_relu" | "elu" | "softplus"
        | "log1p" | "expm1" | "ceil" | "round" | "isnan" | "isfinite" => {
            let f = |t: Tensor| t.sum();
            f(v.clamp_min(1.0))
                + f(v.clamp_max(2.0))
                + f(m.clamp_tensor(&w, &v.unsqueeze(1)))
                + f(v.silu())
                + f(v.leaky_relu(0.1))
                + f(v.elu(1.0))
                + f(v.softplus())
                + f(v.log1p())
                + f(v.expm1())
                + f(v.ceil())
                + f(v.round())
                + f(v.isnan().to_dtype(lazyxla::DType::F32))
                + f(v.isfinite().to_dtype(lazyxla::DType::F32))
        }
        "logsumexp" | "var" | "std" | "prod" | "any" | "all" => {
            m.logsumexp(0, false).sum()
                + m.var(0, false).sum()
                + m.std(1, false).sum()
                + v.prod()
                + v.gt_scalar(2.0).any().to_dtype(lazyxla::DType::F32)
                + v.all().to_dtype(lazyxla::DType::F32)
        }
        "masked_fill" | "tril" | "triu" | "one_hot" => {
            m.masked_fill(&m.gt_scalar(2.0), 0.0).sum()
                + m.tril(0).sum()
                + m.triu(1).sum()
                + idx.one_hot(6).to_dtype(lazyxla::DType::F32).sum()
        }
        "pad" | "repeat" | "flip" | "roll" => {
            m.pad(&[(1, 2), (0, 1)], 5.0).sum()
                + m.repeat(&[2, 3]).sum()
                + m.flip(&[0, 1]).sum()
                + v.roll(2, 0).sum()
                + m.roll(-1, 1).sum()
        }
        "split" | "chunk" => m.split(1, 1)[1].sum() + m.chunk(2, 1)[0].sum(),
        "upsample_nearest2d" | "upsample_bilinear2d" => {
            let x = m.unsqueeze(1).unsqueeze(1); // [<=6, 1, 1, 2]
            x.upsample_nearest2d((2, 3)).sum() + x.upsample_bilinear2d((3, 4), true).sum()
        }
        "all_reduce" => v.all_reduce(lazyxla::parallel::ReduceOp::Sum).sum(),
        "all_gather" => v.all_gather(0).sum(),
        "reduce_scatter" => v.reduce_scatter(0).sum(),
        "replica_id" => &v + &Tensor::replica_id().to_dtype(lazyxla::DType::F32),
        "box_iou" | "roi_align" => {
            // <=6 boxes, as boxes and as RoIs of image 0.
            let b = Tensor::cat(&[&m, &(&m + 1.0)], 1); // [<=6, 4]
            let rois = Tensor::cat(&[&v.zeros_like().unsqueeze(1), &b], 1); // [<=6, 5]
            let feats = Tensor::ones(&[1, 2, 4, 4], lazyxla::DType::F32);
            lazyxla::vision::box_iou(&b, &b).sum()
                + lazyxla::vision::roi_align(&feats, &rois, (2, 2), 1.0, 2, false).sum()
                + lazyxla::vision::roi_align(&feats, &rois, (1, 3), 0.5, 0, true).sum()
        }
        "fori_loop" | "while_loop" => {
            // A dynamic carry that keeps its size, one that shrinks, and
            // a dynamic captured value.
            let kept = lazyxla::fori_loop(2, std::slice::from_ref(&m), |_, c| vec![&c[0] * &m]);
            let shrunk = lazyxla::while_loop(
                &[v.clone(), Tensor::scalar(0i64)],
                |c| c[1].lt_scalar(2.0),
                |c| vec![c[0].masked_select(&c[0].gt_scalar(1.0)), &c[1] + 1],
            );
            kept[0].sum() + shrunk[0].sum()
        }
        "with_bound" => Tensor::cat(&[&v, &v], 0).with_bound(0, 8).sum(),
        "nms" | "batched_nms" => {
            // <=6 boxes scored by their values; classes from a threshold.
            let b = Tensor::cat(&[&m, &(&m + 1.0)], 1); // [<=6, 4]
            let classes = v.gt_scalar(1.0).to_dtype(lazyxla::DType::I64);
            let keep = lazyxla::vision::nms(&b, &v, 0.5);
            let kept = lazyxla::vision::batched_nms(&b, &v, &classes, 0.5);
            keep.to_dtype(lazyxla::DType::F32).sum() + kept.to_dtype(lazyxla::DType::F32).sum()
        }
        "pad_to_bound" => v.pad_to_bound(0.0).sum(),
        "narrow" | "slice" => v.narrow(0, 0, 1).sum() + m.slice(0, 1..3).sum(),
        "select" | "unbind" => v.select(0, 0) + m.select(0, -1).sum() + m.unbind(1)[1].sum(),
        "mark_dynamic" => v.mark_dynamic(0, 10).sum(),
        "mark_dynamic_as" => {
            let other = Tensor::from_vec(vec![0.0f32; 3], &[3])
                .unwrap()
                .mark_dynamic(0, 6);
            v.mark_dynamic_as(0, &other, 0).sum()
        }
        _ => return None,
    };
    out.to_dtype(lazyxla::DType::F32).to_vec::<f32>().unwrap();
    Some(())
}

backend_test! {
    fn table_and_errors_agree() {
        let rows = table();
        assert!(rows.len() > 25, "the table lost rows: {rows:?}");
        for (op, support) in &rows {
            if support.starts_with("yes") {
                let r = std::panic::catch_unwind(|| apply(op));
                assert!(matches!(r, Ok(Some(()))), "{op} is listed as supporting dynamic inputs but failed or is untested");
            } else if support.starts_with("static dims only") {
                let msg = common::panic_message(|| {
                    apply(op).unwrap_or_else(|| panic!("untested"));
                });
                assert!(
                    msg.contains(op.as_str()) && msg.contains("pad_to_bound(fill)") && msg.contains("materialize()") && msg.contains("<=6"),
                    "{op}: the message does not match the table: {msg}"
                );
            } else if support.starts_with("static operands: reduce first") {
                let msg = common::panic_message(|| {
                    apply(op).unwrap_or_else(|| panic!("untested"));
                });
                assert!(
                    msg.contains(op.as_str()) && msg.contains("reduce the dynamic dimensions first") && msg.contains("pad_to_bound(fill)") && msg.contains("<=6"),
                    "{op}: the message does not match the table: {msg}"
                );
            } else {
                panic!("unknown support value {support:?} for {op}");
            }
        }
    }
}
