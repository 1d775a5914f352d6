//! The crate's layers point one way (DESIGN.md, "Layers"): a top-level
//! module of `src/` imports (through `crate::`) only modules of earlier
//! layers or its own. Unit-test sections (`#[cfg(test)]` onwards) may reach
//! anywhere.

use std::collections::BTreeMap;
use std::path::Path;

/// The layers, first to last.
const LAYERS: &[&[&str]] = &[
    &["dtype", "error", "metrics"],
    &["host", "symint"],
    &["ir"],
    &["backend"],
    &["device"],
    &["runtime"],
    &["tensor"],
    &["autograd", "capture", "optim", "safetensors", "sharding"],
    &["nn", "parallel", "vision"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn sources(path: &Path, out: &mut Vec<String>) {
    if path.is_dir() {
        for e in std::fs::read_dir(path).unwrap() {
            sources(&e.unwrap().path(), out);
        }
    } else if path.extension().is_some_and(|x| x == "rs") {
        let text = std::fs::read_to_string(path).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("").to_string();
        out.push(code);
    }
}

/// Which top-level modules each top-level module imports.
fn imports() -> BTreeMap<String, Vec<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = BTreeMap::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        if name == "lib" {
            continue;
        }
        let mut texts = Vec::new();
        sources(&path, &mut texts);
        let mut used: Vec<String> = Vec::new();
        for text in &texts {
            for (i, _) in text.match_indices("crate::") {
                let rest = &text[i + "crate::".len()..];
                let ident: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if ident != name && layer_of(&ident).is_some() && !used.contains(&ident) {
                    used.push(ident);
                }
            }
        }
        graph.insert(name, used);
    }
    graph
}

#[test]
fn every_top_level_module_has_a_layer() {
    for m in imports().keys() {
        assert!(
            layer_of(m).is_some(),
            "src/{m} has no layer: add it to LAYERS here and to DESIGN.md"
        );
    }
}

#[test]
fn imports_point_only_to_earlier_layers() {
    let mut wrong = Vec::new();
    for (m, used) in imports() {
        let Some(mine) = layer_of(&m) else { continue };
        for u in used {
            let theirs = layer_of(&u).expect("filtered to known modules");
            if theirs >= mine && !LAYERS[mine].contains(&u.as_str()) {
                wrong.push(format!("{m} (layer {mine}) imports {u} (layer {theirs})"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn modules_of_one_layer_do_not_import_each_other_in_a_cycle() {
    let graph = imports();
    for (m, used) in &graph {
        for u in used {
            let back = graph.get(u).is_some_and(|theirs| theirs.contains(m));
            assert!(!back, "{m} and {u} import each other");
        }
    }
}

/// The replay's hooks into tensor internals (`tensor::replay_hooks`) serve
/// `capture` alone: any other caller would bind results behind the
/// runtime's back.
#[test]
fn only_capture_uses_the_replay_hooks() {
    fn walk(path: &Path, out: &mut Vec<(String, String)>) {
        if path.is_dir() {
            for e in std::fs::read_dir(path).unwrap() {
                walk(&e.unwrap().path(), out);
            }
        } else if path.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(path).unwrap();
            out.push((path.display().to_string(), text));
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    let hooks = [
        "replay_hooks",
        ".write_result(",
        ".is_sole_handle(",
        ".rebind(",
    ];
    let mut wrong = Vec::new();
    for (path, text) in &files {
        let allowed = path.contains("/src/capture/")
            || path.ends_with("/src/tensor/replay_hooks.rs")
            || path.ends_with("/src/tensor/mod.rs");
        for h in hooks {
            if !allowed && text.contains(h) {
                wrong.push(format!("{path} uses {h}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "replay hooks outside capture:\n{}",
        wrong.join("\n")
    );
}
