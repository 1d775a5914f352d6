//! Text generation with a Hugging Face GPT-2: a prompt of token ids,
//! greedy or sampled continuation, a key-value cache that grows by `cat`
//! every token, and a handful of compiled programs for the whole run.
//!
//! ```sh
//! cargo run --release --example generate -- --model DIR --prompt 464,3290,318 \
//!     --max-new-tokens 150 [--bound fixed:256 | --bound buckets:16..256] \
//!     [--temperature T --top-k K --seed S]
//! ```
//!
//! `DIR` holds `config.json` and `model.safetensors` as `transformers`'
//! `save_pretrained` writes them. `--bound fixed:N` compiles one program
//! for the prompt and one for every later token, each working on `N`
//! positions; `--bound buckets:MIN..MAX` (the default, `16..n_positions`)
//! bounds each step by the power of two that holds its length, so the
//! work follows the real length, with one program per bucket. A progress
//! bar goes to stderr; the last line of stdout is one JSON object:
//! `{"tokens": [..], "compiles": N, "prefill_ms": x, "ms_per_token": y,
//! "buckets": [..]}`.

#[path = "models/gpt2.rs"]
#[allow(dead_code)] // batched decoding serves the tests
mod gpt2;

use gpt2::{Choice, Gpt2};
use lazyxla::{metrics, SizeBuckets};
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: generate --model DIR --prompt ID,ID,.. --max-new-tokens N \
[--bound fixed:N | --bound buckets:MIN..MAX] [--temperature T] [--top-k K] [--seed S]";

enum Bound {
    Fixed(usize),
    Buckets(SizeBuckets),
}

struct Args {
    model: PathBuf,
    prompt: Vec<i64>,
    new_tokens: usize,
    bound: Option<Bound>,
    temperature: Option<f64>,
    top_k: Option<usize>,
    seed: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let (mut model, mut prompt, mut new_tokens) = (None, None, None);
    let (mut bound, mut temperature, mut top_k, mut seed) = (None, None, None, 0);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        let number = |v: String| {
            v.parse::<usize>()
                .map_err(|_| format!("{flag}: {v:?} is not a number"))
        };
        match flag.as_str() {
            "--model" => model = Some(PathBuf::from(value()?)),
            "--prompt" => {
                let ids: Result<Vec<i64>, _> =
                    value()?.split(',').map(|t| t.trim().parse()).collect();
                prompt = Some(
                    ids.map_err(|_| "--prompt takes token ids separated by commas".to_string())?,
                );
            }
            "--max-new-tokens" => new_tokens = Some(number(value()?)?),
            "--bound" => {
                let v = value()?;
                bound = Some(if let Some(n) = v.strip_prefix("fixed:") {
                    Bound::Fixed(number(n.to_string())?)
                } else if let Some(b) = v.strip_prefix("buckets:") {
                    Bound::Buckets(SizeBuckets::parse(b).map_err(|e| e.to_string())?)
                } else {
                    return Err(format!("--bound {v:?}: use fixed:N or buckets:MIN..MAX"));
                });
            }
            "--temperature" => {
                let v = value()?;
                let t: f64 = v
                    .parse()
                    .map_err(|_| format!("--temperature {v:?} is not a number"))?;
                if t.is_nan() || t <= 0.0 {
                    return Err("--temperature must be positive".into());
                }
                temperature = Some(t);
            }
            "--top-k" => top_k = Some(number(value()?)?),
            "--seed" => seed = number(value()?)? as u64,
            "--help" | "-h" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(Args {
        model: model.ok_or(format!("--model is required\n{USAGE}"))?,
        prompt: prompt.ok_or(format!("--prompt is required\n{USAGE}"))?,
        new_tokens: new_tokens.ok_or(format!("--max-new-tokens is required\n{USAGE}"))?,
        bound,
        temperature,
        top_k,
        seed,
    })
}

fn run(args: Args) -> lazyxla::Result<String> {
    let model = Gpt2::from_pretrained(&args.model)?;
    let positions = model.config.n_positions;
    let bound = match args.bound {
        Some(b) => b,
        None => Bound::Buckets(SizeBuckets::powers_of_two(16.min(positions), positions)?),
    };
    let max_len = match &bound {
        Bound::Fixed(n) => *n,
        Bound::Buckets(b) => b.max(),
    };
    if max_len > positions {
        return Err(lazyxla::Error::InvalidArgument {
            op: "generate",
            message: format!("the bound {max_len} is above the model's n_positions {positions}"),
        });
    }
    lazyxla::set_size_buckets(match bound {
        Bound::Fixed(_) => None,
        Bound::Buckets(b) => Some(b),
    });
    let choice = match (args.temperature, args.top_k) {
        (None, None) => Choice::Greedy,
        (t, k) => Choice::Sample {
            temperature: t.unwrap_or(1.0),
            top_k: k,
            seed: args.seed,
        },
    };
    let bar = indicatif::ProgressBar::new(args.new_tokens as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} tokens {per_sec}")
            .expect("a valid template"),
    );
    let compiles = metrics::counter("UncachedCompile");
    let out = gpt2::generate(
        &model,
        &args.prompt,
        args.new_tokens,
        max_len,
        choice,
        false,
        |_| bar.inc(1),
    )?;
    bar.finish();
    let mut buckets = out.bounds.clone();
    buckets.sort_unstable();
    buckets.dedup();
    let per_token = match args.new_tokens {
        0 | 1 => 0.0,
        n => out.decode.as_secs_f64() * 1e3 / (n - 1) as f64,
    };
    let list = |v: &[String]| v.join(", ");
    Ok(format!(
        "{{\"tokens\": [{}], \"compiles\": {}, \"prefill_ms\": {:.3}, \"ms_per_token\": {:.3}, \"buckets\": [{}]}}",
        list(&out.tokens.iter().map(i64::to_string).collect::<Vec<_>>()),
        metrics::counter("UncachedCompile") - compiles,
        out.prefill.as_secs_f64() * 1e3,
        per_token,
        list(&buckets.iter().map(usize::to_string).collect::<Vec<_>>()),
    ))
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("generate: {e}");
            ExitCode::FAILURE
        }
    }
}
