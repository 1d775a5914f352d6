//! Copying host data that is not in cache, by where the destination falls
//! relative to the source within a 4 KiB page: a plain copy at each
//! distance, then `Tensor::from_slice` from sources at each 4-byte offset
//! (it picks its destination clear of the slow distances, see
//! `host::aligned_copy`). Needs no plugin: `from_slice` only copies.
//!
//! Run: `cargo bench --bench host_copy [-- BYTES]` (default 262144).
//! Prints `RESULT copy past=<bytes> us=<f>` per distance and
//! `RESULT from_slice offset=<bytes> us=<f>` per source offset: medians
//! over copies from sources that were written long before (1000 sources
//! of BYTES each, cycled, far more than the caches hold).

use std::time::Instant;

const SOURCES: usize = 1000;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let bytes: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(262_144);
    let n = bytes / 4;
    // Each source has a spare page, so a copy can start at any offset.
    let sources: Vec<Vec<f32>> = (0..SOURCES).map(|i| vec![i as f32; n + 2048]).collect();
    let mut dst = vec![0f32; n + 2048];
    let dst_at = dst.as_ptr() as usize;
    for past in [0usize, 4, 8, 16, 24, 32, 48, 64, 128, 1024, 4032] {
        let times = (0..SOURCES)
            .map(|i| {
                // The source start that puts the destination `past` bytes
                // after it, modulo a page (a multiple of 4: both are `f32`).
                let src = &sources[i];
                let k = dst_at.wrapping_sub(past + src.as_ptr() as usize) % 4096 / 4;
                let from = &src[k..][..n];
                let t = Instant::now();
                dst[..n].copy_from_slice(from);
                std::hint::black_box(&dst);
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        println!("RESULT copy past={past} us={:.1}", median(times));
    }
    for offset in (0..64).step_by(4) {
        let times = (0..SOURCES)
            .map(|i| {
                let from = &sources[i][offset / 4..][..n];
                let t = Instant::now();
                let x = lazyxla::Tensor::from_slice(from, &[n]).unwrap();
                let us = t.elapsed().as_secs_f64() * 1e6;
                drop(std::hint::black_box(x));
                us
            })
            .collect();
        println!("RESULT from_slice offset={offset} us={:.1}", median(times));
    }
}
