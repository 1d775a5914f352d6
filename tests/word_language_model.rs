//! `examples/word_language_model.rs` (a 2-layer `nn::Lstm` language model
//! with a tied decoder, truncated BPTT and sequence lengths that vary per
//! batch) learns its synthetic corpus and compiles one training program
//! and one evaluation program for every length, on both backends.

mod common;

#[allow(dead_code)]
#[path = "../examples/word_language_model.rs"]
mod wlm;

backend_test! {
    fn the_word_language_model_learns_and_compiles_once_for_every_length() {
        let report = wlm::run(2, false).unwrap();
        let distinct: std::collections::BTreeSet<usize> = report.lengths.iter().copied().collect();
        assert!(distinct.len() > 4, "the lengths vary per batch: {distinct:?}");
        assert_eq!(report.compiles, 2, "{}", lazyxla::metrics::report());
        let ppl = &report.valid_ppl;
        // A uniform guess over the 48 tokens has perplexity 48; the
        // chain's own is about 2.6.
        assert!(ppl[1] < ppl[0] && ppl[1] < 12.0, "validation perplexity {ppl:?}");
    }
}
