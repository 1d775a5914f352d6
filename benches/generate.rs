//! GPT-2 greedy decoding with a growing key-value cache: lazyxla's side of
//! `benches/peers/compare_generate.sh` (Hugging Face `generate` and a JAX
//! static-cache decode are the peers).
//!
//! ```sh
//! cargo bench --bench generate -- MODEL_DIR [--prompt-len 128] [--new 128] \
//!     [--bound buckets:16..256 | fixed:256] [--rounds 3]
//! ```
//!
//! The prompt's token `i` is `(1000 + 7919 i) % vocab`, as the peers'.
//! Prints one line
//!
//! ```text
//! RESULT gpt2 lazyxla prefill_ms=<f> ms_per_token=<f> total_ms=<f> first_ms=<f> compiles=<n> cache_ratio=<f> cpu_ms_per_token=<f>
//! ```
//!
//! `first_ms`: the first generation, compiles included; the others are
//! medians over the rounds after it (as the peers measure after a warm-up):
//! `prefill_ms` the prompt's step up to the first token on the host,
//! `total_ms` all new tokens, `ms_per_token` the rest divided by NEW - 1.
//! `compiles`: programs compiled by the first generation; `cache_ratio`:
//! the largest ratio, over its steps, of the cache's buffer length to the
//! real length (bucketed buffers are one element longer than the bucket);
//! `cpu_ms_per_token`: the process's CPU time (all threads) for the new
//! tokens after the first, per token, the median over the rounds (the
//! peers print the same; on a loaded machine it is the steadier figure).

#[path = "../examples/models/gpt2.rs"]
#[allow(dead_code)]
mod gpt2;

#[path = "workloads/cpu.rs"]
mod cpu;

use cpu::cpu_ms;
use gpt2::{Choice, Gpt2};
use lazyxla::SizeBuckets;
use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let mut dir = None;
    let (mut prompt_len, mut new, mut rounds) = (128usize, 128usize, 3usize);
    let mut bound = "buckets:16..256".to_string();
    while let Some(a) = args.next() {
        let mut value = || args.next().expect("a value after the flag");
        match a.as_str() {
            "--prompt-len" => prompt_len = value().parse().expect("a number"),
            "--new" => new = value().parse().expect("a number"),
            "--rounds" => rounds = value().parse().expect("a number"),
            "--bound" => bound = value(),
            other => dir = Some(PathBuf::from(other)),
        }
    }
    let dir =
        dir.expect("usage: generate MODEL_DIR [--prompt-len N] [--new N] [--bound B] [--rounds N]");
    let model = Gpt2::from_pretrained(&dir).expect("a GPT-2 directory");
    let max_len = match bound.split_once(':') {
        Some(("fixed", n)) => {
            lazyxla::set_size_buckets(None);
            n.parse().expect("fixed:N")
        }
        Some(("buckets", b)) => {
            let b = SizeBuckets::parse(b).expect("buckets:MIN..MAX");
            lazyxla::set_size_buckets(Some(b));
            b.max()
        }
        _ => panic!("--bound fixed:N or buckets:MIN..MAX"),
    };
    let vocab = model.config.vocab_size as i64;
    let prompt: Vec<i64> = (0..prompt_len as i64)
        .map(|i| (1000 + 7919 * i) % vocab)
        .collect();
    let run_n = |n: usize| {
        let start = std::time::Instant::now();
        let cpu = cpu_ms();
        let out = gpt2::generate(&model, &prompt, n, max_len, Choice::Greedy, false, |_| {})
            .expect("generation");
        (start.elapsed(), out, cpu_ms() - cpu)
    };
    let run = || {
        let (all, out, _) = run_n(new);
        (all, out)
    };
    let compiles = lazyxla::metrics::counter("UncachedCompile");
    let (first, out) = run();
    let compiles = lazyxla::metrics::counter("UncachedCompile") - compiles;
    let buckets = lazyxla::size_buckets().is_some();
    let cache_ratio = out
        .bounds
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, &b)| {
            let buffer = if buckets { b + 1 } else { b };
            buffer as f64 / (prompt_len + i - 1) as f64
        })
        .fold(0.0f64, f64::max);
    eprintln!("tokens[:32] {:?}", &out.tokens[..out.tokens.len().min(32)]);
    eprintln!("bounds used {:?}", {
        let mut b = out.bounds.clone();
        b.dedup();
        b
    });
    let (mut prefill, mut total, mut cpu) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (_, _, cpu_prefill) = run_n(1);
        let (all, out, cpu_all) = run_n(new);
        prefill.push(out.prefill.as_secs_f64() * 1e3);
        total.push(all.as_secs_f64() * 1e3);
        cpu.push((cpu_all - cpu_prefill) / (new.max(2) - 1) as f64);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (p, t, c) = (median(&mut prefill), median(&mut total), median(&mut cpu));
    println!(
        "RESULT gpt2 lazyxla prefill_ms={p:.3} ms_per_token={:.3} total_ms={t:.3} first_ms={:.3} compiles={compiles} cache_ratio={cache_ratio:.2} cpu_ms_per_token={c:.3}",
        (t - p) / (new.max(2) - 1) as f64,
        first.as_secs_f64() * 1e3
    );
}
