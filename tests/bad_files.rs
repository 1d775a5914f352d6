//! Files that are not what they claim give errors naming the file or the
//! tensor, never a panic or an abort: safetensors files truncated, with a
//! header that lies about shapes or offsets, or not safetensors at all; a
//! state dict whose tensor has another shape. (The other files lazyxla
//! reads are checked where they are read: GPT-2's `config.json` in
//! `tests/generation.rs`, compilation cache entries in
//! `tests/persistent_cache.rs`, a file that is no plugin in
//! `tests/pjrt_backend.rs`.)

mod common;

use lazyxla::nn::{self, Linear, Module};
use lazyxla::{safetensors, Device, Tensor};
use std::path::{Path, PathBuf};

/// A valid file in `dir` of one `f32[2, 3]` tensor named `w`, and its
/// bytes.
fn valid(dir: &Path) -> (PathBuf, Vec<u8>) {
    let path = dir.join("valid.safetensors");
    let w = Tensor::from_vec((0..6).map(|v| v as f32).collect(), &[2, 3]).unwrap();
    safetensors::save(&path, &[("w".into(), w)]).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

/// A file in `dir` whose JSON header is `header` followed by `data`.
fn with_header(dir: &Path, name: &str, header: &str, data: &[u8]) -> PathBuf {
    let path = dir.join(name);
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn damaged_safetensors_files_are_errors_naming_the_file() {
    let _g = common::lock();
    let scratch = common::scratch();
    let dir = scratch.path();
    Device::reference().scoped(|| {
        let (_, bytes) = valid(dir);
        let load_err = |path: &PathBuf| {
            let e = safetensors::load(path).expect_err("an error").to_string();
            assert!(
                e.contains(&path.display().to_string()),
                "the file is named: {e}"
            );
            e
        };
        // Truncated anywhere: in the length, the header or the data.
        for cut in [3, 20, bytes.len() - 4] {
            let path = dir.join(format!("cut{cut}.safetensors"));
            std::fs::write(&path, &bytes[..cut]).unwrap();
            load_err(&path);
        }
        // A header longer than the file.
        let path = dir.join("long.safetensors");
        let mut long = (1u64 << 40).to_le_bytes().to_vec();
        long.extend_from_slice(b"{}");
        std::fs::write(&path, long).unwrap();
        load_err(&path);
        // Lying headers: a shape the data offsets do not hold, offsets
        // past the data, an unknown dtype, not JSON.
        let data = [0u8; 24];
        for (name, header) in [
            (
                "shape",
                r#"{"w":{"dtype":"F32","shape":[4,3],"data_offsets":[0,24]}}"#,
            ),
            (
                "offsets",
                r#"{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,48]}}"#,
            ),
            (
                "dtype",
                r#"{"w":{"dtype":"F33","shape":[2,3],"data_offsets":[0,24]}}"#,
            ),
            ("json", r#"{"w":{"dtype":"F32","shape":[2,3]"#),
        ] {
            load_err(&with_header(
                dir,
                &format!("{name}.safetensors"),
                header,
                &data,
            ));
        }
        // Not safetensors at all; no file.
        let path = dir.join("text.safetensors");
        std::fs::write(&path, "just some text, not a checkpoint").unwrap();
        load_err(&path);
        load_err(&dir.join("missing.safetensors"));
        // The runtime is fine afterwards.
        let (path, _) = valid(dir);
        assert_eq!(
            safetensors::load(&path).unwrap()[0]
                .1
                .to_vec::<f32>()
                .unwrap()
                .len(),
            6
        );
    });
}

#[test]
fn a_state_dict_of_other_shapes_names_the_tensor_and_both_shapes_and_changes_nothing() {
    let _g = common::lock();
    Device::reference().scoped(|| {
        let model = Linear::new(3, 2, 0);
        let before: Vec<Vec<f32>> = model
            .parameters()
            .iter()
            .map(|p| p.to_vec::<f32>().unwrap())
            .collect();
        let named = vec![
            (
                "weight".to_string(),
                Tensor::zeros(&[2, 4], lazyxla::DType::F32),
            ),
            ("bias".to_string(), Tensor::zeros(&[2], lazyxla::DType::F32)),
        ];
        let e = nn::load_state_dict(&model, &named, true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("weight") && e.contains("[2, 4]") && e.contains("[2, 3]"),
            "{e}"
        );
        let after: Vec<Vec<f32>> = model
            .parameters()
            .iter()
            .map(|p| p.to_vec::<f32>().unwrap())
            .collect();
        assert_eq!(before, after, "nothing changed");
    });
}
