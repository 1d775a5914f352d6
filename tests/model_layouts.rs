//! The bigger models of `examples/models` declare exactly the tensors of
//! their originals: torchvision's `resnet50` and Hugging Face's GPT-2
//! small, names and shapes in order, as `tests/fixtures/
//! gen_model_layouts.py` wrote them. A state dict saved by either then
//! loads as it is. No device work: parameters are made on the host.

#[path = "../examples/models/gpt2.rs"]
#[allow(dead_code)]
mod gpt2;

#[path = "../examples/models/resnet50.rs"]
#[allow(dead_code)]
mod resnet50;

use lazyxla::nn::Module;

/// The fixture's `(name, shape)` lines.
fn layout(file: &str) -> Vec<(String, Vec<usize>)> {
    let path = format!("{}/tests/fixtures/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .lines()
        .map(|l| {
            let (name, dims) = l.split_once(' ').expect("`name dims`");
            let shape = dims.split('x').map(|d| d.parse().unwrap()).collect();
            (name.to_string(), shape)
        })
        .collect()
}

#[test]
fn resnet50_has_torchvisions_parameters() {
    let net = resnet50::ResNet50::new(1000, 0);
    let ours: Vec<(String, Vec<usize>)> = net
        .named_parameters()
        .into_iter()
        .map(|(n, t)| (n, t.upper_bounds()))
        .collect();
    let theirs = layout("resnet50_parameters.txt");
    assert_eq!(ours, theirs);
    let count: usize = theirs
        .iter()
        .map(|(_, s)| s.iter().product::<usize>())
        .sum();
    assert_eq!(count, 25_557_032);
}

#[test]
fn gpt2_small_has_hugging_faces_tensors() {
    let config = gpt2::Config::gpt2_small();
    let mut ours = config.tensor_shapes();
    let mut theirs = layout("gpt2_small_parameters.txt");
    // The order of a safetensors file is by name; compare as sets.
    ours.sort();
    theirs.sort();
    assert_eq!(ours, theirs);
    let count: usize = theirs
        .iter()
        .map(|(_, s)| s.iter().product::<usize>())
        .sum();
    assert_eq!(count, 124_439_808);
}
