//! GPT-2 generation against Hugging Face `transformers`: a small seeded
//! GPT-2 and its greedy continuations, written by
//! `tests/fixtures/gen_gpt2.py` (see `tests/fixtures/README.md`), decoded
//! with a growing key-value cache on both backends, with bucketed and
//! fixed bounds, and the programs each mode compiles.

mod common;

#[path = "../examples/models/gpt2.rs"]
#[allow(dead_code)]
mod gpt2;

use gpt2::{Choice, Config, Gpt2};
use lazyxla::metrics::counter;
use lazyxla::{SizeBuckets, Tensor};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const NEW_TOKENS: usize = 150;
const MAX_LEN: usize = 256;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gpt2")
}

/// A greedy continuation from the fixture file.
struct Case {
    prompt: Vec<i64>,
    tokens: Vec<i64>,
    /// Row `i`: the logits token `i` was chosen from.
    logits: Vec<Vec<f32>>,
}

/// The fixture's cases, by prompt length.
fn cases() -> Vec<Case> {
    let named: HashMap<String, Tensor> = lazyxla::Device::reference().scoped(|| {
        lazyxla::safetensors::load(fixtures().join("greedy.safetensors"))
            .unwrap()
            .into_iter()
            .collect()
    });
    let mut out = Vec::new();
    for k in 0.. {
        let Some(prompt) = named.get(&format!("case{k}.prompt")) else {
            break;
        };
        let logits = &named[&format!("case{k}.logits")];
        let vocab = logits.upper_bounds()[1];
        out.push(Case {
            prompt: prompt.to_vec::<i64>().unwrap(),
            tokens: named[&format!("case{k}.tokens")].to_vec::<i64>().unwrap(),
            logits: logits
                .to_vec::<f32>()
                .unwrap()
                .chunks(vocab)
                .map(<[f32]>::to_vec)
                .collect(),
        });
    }
    out.sort_by_key(|c| c.prompt.len());
    assert!(out.len() >= 6, "the fixture has {} cases", out.len());
    out
}

fn model() -> Gpt2 {
    Gpt2::from_pretrained(&fixtures().join("tiny")).unwrap()
}

/// Sets the process's buckets for one test and turns them off after it.
struct Buckets;

impl Buckets {
    fn set(b: Option<SizeBuckets>) -> Buckets {
        lazyxla::set_size_buckets(b);
        Buckets
    }
}

impl Drop for Buckets {
    fn drop(&mut self) {
        lazyxla::set_size_buckets(None);
    }
}

/// Decodes `case` greedily and checks tokens and logits against
/// `transformers`; returns the bounds each step ran with.
fn check(model: &Gpt2, case: &Case) -> Vec<usize> {
    let out = gpt2::generate(
        model,
        &case.prompt,
        NEW_TOKENS,
        MAX_LEN,
        Choice::Greedy,
        true,
        |_| {},
    )
    .unwrap();
    let len = case.prompt.len();
    assert_eq!(out.tokens, case.tokens, "prompt of {len} tokens");
    for (i, (got, want)) in out.logits.iter().zip(&case.logits).enumerate() {
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
                "prompt of {len}, token {i}: logit {g} against transformers' {w}"
            );
        }
    }
    out.bounds
}

backend_test! {
    fn greedy_decoding_with_buckets_matches_transformers_one_program_per_bucket() {
        let _b = Buckets::set(Some(SizeBuckets::powers_of_two(16, MAX_LEN).unwrap()));
        let (model, cases) = (model(), cases());
        // The longest prompt first, 61 tokens: its prefill and 150 tokens
        // pass the buckets 64, 128 and 256.
        let longest = cases.last().unwrap();
        assert_eq!(longest.prompt.len(), 61);
        let bounds = check(&model, longest);
        assert_eq!(counter("UncachedCompile"), 4, "one prefill, one program per bucket");
        let mut used = bounds.clone();
        used.dedup();
        assert_eq!(used, [64, 128, 256]);
        // Each step works on at most twice its real length.
        for (i, &b) in bounds.iter().enumerate() {
            // The prompt's 61 tokens, then the cache before each token.
            let real = if i == 0 { 61 } else { 60 + i };
            assert!(b <= 2 * real, "step {i} ran on {real} positions with a bound of {b}");
        }
        // The other prompts reuse those programs and add the buckets 16 and
        // 32 (two prefills, two decode programs) and the prefill of 16.
        for case in &cases[..cases.len() - 1] {
            check(&model, case);
        }
        assert_eq!(counter("UncachedCompile"), 8);
    }
}

backend_test! {
    fn greedy_decoding_with_a_fixed_bound_compiles_two_programs() {
        let _b = Buckets::set(None);
        let model = model();
        for case in cases() {
            let bounds = check(&model, &case);
            assert!(bounds.iter().all(|&b| b == MAX_LEN), "{bounds:?}");
        }
        assert_eq!(counter("UncachedCompile"), 2, "one prefill and one decode program for every length");
    }
}

backend_test! {
    fn a_batch_of_prompts_decodes_as_each_prompt_alone() {
        let _b = Buckets::set(None);
        let (model, cases) = (model(), cases());
        let new = 12;
        let batch = |picks: &[usize]| {
            let prompts: Vec<Vec<i64>> = picks.iter().map(|&i| cases[i].prompt.clone()).collect();
            let out = gpt2::generate_batch(&model, &prompts, new, MAX_LEN).unwrap();
            for (row, &i) in out.iter().zip(picks) {
                assert_eq!(row[..], cases[i].tokens[..new], "prompt of {}", cases[i].prompt.len());
            }
        };
        batch(&[1, 3, 4]);
        let compiles = counter("UncachedCompile");
        // Other lengths, the same batch size: no new program.
        batch(&[0, 2, 5]);
        assert_eq!(counter("UncachedCompile"), compiles);
    }
}

backend_test! {
    fn sampling_is_reproducible_from_its_seed() {
        let _b = Buckets::set(None);
        let (model, cases) = (model(), cases());
        let case = &cases[1];
        let run = |choice| {
            gpt2::generate(&model, &case.prompt, 20, MAX_LEN, choice, false, |_| {})
                .unwrap()
                .tokens
        };
        let sample = |seed| Choice::Sample { temperature: 1.5, top_k: Some(40), seed };
        assert_eq!(run(sample(7)), run(sample(7)));
        assert_ne!(run(sample(7)), run(sample(8)));
        // The single most likely token is greedy decoding.
        let top1 = Choice::Sample { temperature: 1.0, top_k: Some(1), seed: 3 };
        assert_eq!(run(top1)[..], case.tokens[..20]);
    }
}

/// A copy of the tiny model whose `config.json` is `edit`ed.
/// The copy is removed when the directory is dropped.
fn with_config(edit: impl FnOnce(&mut serde_json::Value)) -> tempfile::TempDir {
    let scratch = common::scratch();
    let dir = scratch.path();
    let tiny = fixtures().join("tiny");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tiny.join("config.json")).unwrap()).unwrap();
    edit(&mut config);
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    std::fs::copy(
        tiny.join("model.safetensors"),
        dir.join("model.safetensors"),
    )
    .unwrap();
    scratch
}

#[test]
fn files_that_do_not_match_are_clear_errors() {
    let _g = common::lock();
    lazyxla::Device::reference().scoped(|| {
        let err = |dir: &Path| {
            Gpt2::from_pretrained(dir)
                .err()
                .expect("an error")
                .to_string()
        };
        // A config that disagrees with the weights: the tensor and both shapes.
        let dir = with_config(|c| c["n_embd"] = 96.into());
        let e = err(dir.path());
        assert!(
            e.contains("\"wte.weight\"") && e.contains("[512, 64]") && e.contains("[512, 96]"),
            "{e}"
        );
        let dir = with_config(|c| c["n_layer"] = 3.into());
        let e = err(dir.path());
        assert!(e.contains("no tensor \"h.2.ln_1.weight\""), "{e}");
        let dir = with_config(|c| c["activation_function"] = "relu".into());
        assert!(
            err(dir.path()).contains("activation_function \"relu\""),
            "{}",
            err(dir.path())
        );
        let dir = with_config(|c| {
            c.as_object_mut().unwrap().remove("n_head");
        });
        assert!(
            err(dir.path()).contains("\"n_head\" is missing"),
            "{}",
            err(dir.path())
        );
        std::fs::write(dir.path().join("config.json"), "{not json").unwrap();
        assert!(err(dir.path()).contains("not JSON"), "{}", err(dir.path()));
        let e = err(Path::new("/nonexistent/gpt2"));
        assert!(e.contains("/nonexistent/gpt2/config.json"), "{e}");
        // A prompt outside the vocabulary, or longer than the bound.
        let model = model();
        let e = gpt2::generate(&model, &[600], 1, 8, Choice::Greedy, false, |_| {})
            .err()
            .unwrap();
        assert!(
            e.to_string().contains("outside the vocabulary 0..512"),
            "{e}"
        );
        let e = gpt2::generate(&model, &[1; 8], 1, 8, Choice::Greedy, false, |_| {})
            .err()
            .unwrap();
        assert!(e.to_string().contains("raise the bound"), "{e}");
    });
}

#[test]
fn the_config_parser_reads_gpt2_s_fields() {
    let c = Config::parse(
        r#"{"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12,
            "n_head": 12, "n_inner": null, "activation_function": "gelu_new",
            "layer_norm_epsilon": 1e-05, "model_type": "gpt2"}"#,
    )
    .unwrap();
    assert_eq!(
        (c.n_embd, c.n_inner, c.n_head, c.n_layer),
        (768, 3072, 12, 12)
    );
    assert!(Config::parse(
        r#"{"vocab_size": 5, "n_positions": 8, "n_embd": 10, "n_layer": 1, "n_head": 3}"#
    )
    .unwrap_err()
    .contains("not a multiple of n_head"));
}
