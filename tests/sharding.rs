//! Sharding over a 4-device mesh (`lazyxla::sharding`), on both
//! backends: sharded programs equal the same programs on one device
//! within 1e-5, compile once, chain without reading back, and a wrong
//! mesh or spec is a clear error that loses nothing.

mod common;

use common::{assert_close, Lcg};
use lazyxla::sharding::Mesh;
use lazyxla::{mark_step, metrics, Tensor};

fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut g = Lcg(seed);
    (0..n)
        .map(|_| (g.next() % 2001) as f32 / 1000.0 - 1.0)
        .collect()
}

fn host(seed: u64, shape: &[usize]) -> Tensor {
    Tensor::from_vec(values(seed, shape.iter().product()), shape).unwrap()
}

fn mesh_1d() -> Mesh {
    Mesh::new(&lazyxla::devices(), &[4], &["data"]).unwrap()
}

/// `n` on XLA; 0 on the reference backend, which donates nothing.
fn donated_on(mesh: &Mesh, n: u64) -> u64 {
    match mesh.device().name().starts_with("pjrt") {
        true => n,
        false => 0,
    }
}

fn mesh_2d() -> Mesh {
    Mesh::new(&lazyxla::devices(), &[2, 2], &["data", "model"]).unwrap()
}

backend_test! {
    /// `x [8, 6]` split by rows over "data", `w [6, 4]` by columns over
    /// "model": one program, the product assembled on read.
    fn sharded_matmul() {
        let (x, w) = (host(1, &[8, 6]), host(2, &[6, 4]));
        let want = x.matmul(&w).to_vec::<f32>().unwrap();
        let mesh = mesh_2d();
        let xs = x.mark_sharding(&mesh, &[Some("data"), None]).unwrap();
        let ws = w.mark_sharding(&mesh, &[None, Some("model")]).unwrap();
        assert_eq!(xs.sharding().unwrap().tiles(), &[2, 1]);
        assert_eq!(ws.sharding().unwrap().tiles(), &[1, 2]);
        metrics::reset();
        let y = xs.matmul(&ws);
        mark_step().unwrap();
        assert_eq!(metrics::counter("UncachedCompile"), 1);
        assert_eq!(y.device(), mesh.device());
        assert_close(&y.to_vec::<f32>().unwrap(), &want, 1e-5);
        // The inputs read back whole.
        assert_close(&xs.to_vec::<f32>().unwrap(), &x.to_vec::<f32>().unwrap(), 0.0);
    }
}

backend_test! {
    /// Uneven splits pad: 10 rows over 4 devices, a piece of 3 padded
    /// rows on each (on both backends: the reference keeps the pieces).
    fn uneven_split_reads_back() {
        let x = host(3, &[10, 3]);
        let mesh = mesh_1d();
        let before: Vec<usize> = mesh.devices().iter().map(|d| d.memory_stats().live_bytes).collect();
        let xs = x.mark_sharding(&mesh, &[Some("data"), None]).unwrap();
        for (d, b) in mesh.devices().iter().zip(&before) {
            assert_eq!(d.memory_stats().live_bytes - b, 3 * 3 * 4, "{}", d.name());
        }
        let y = (&xs * 2.0).sum_dims(&[1], false);
        let want = (&x * 2.0).sum_dims(&[1], false).to_vec::<f32>().unwrap();
        assert_close(&y.to_vec::<f32>().unwrap(), &want, 1e-5);
        assert_close(&xs.to_vec::<f32>().unwrap(), &x.to_vec::<f32>().unwrap(), 0.0);
    }
}

backend_test! {
    /// A constraint on a pending value: the value is moved inside the
    /// program, and the result keeps the constraint's sharding.
    fn constraint_on_pending_value() {
        let mesh = mesh_1d();
        let x = host(4, &[8, 8]);
        let xs = x.mark_sharding(&mesh, &[Some("data"), None]).unwrap();
        let y = xs.sin().mark_sharding(&mesh, &[None, Some("data")]).unwrap();
        assert_eq!(y.sharding().unwrap().tiles(), &[1, 4]);
        let z = &y * 2.0;
        let want = (&x.sin() * 2.0).to_vec::<f32>().unwrap();
        mark_step().unwrap();
        assert_close(&z.to_vec::<f32>().unwrap(), &want, 1e-5);
        assert_eq!(y.sharding().unwrap().tiles(), &[1, 4]);
    }
}

backend_test! {
    /// Three steps chain on the devices: nothing is read back between
    /// them, and the program compiles once.
    fn steps_chain_without_host_reads() {
        let mesh = mesh_1d();
        let w0 = host(5, &[8, 8]);
        let mut want = w0.clone();
        for _ in 0..3 {
            want = (&want * 0.5 + 1.0).tanh();
        }
        let want = want.to_vec::<f32>().unwrap();
        let w = w0.mark_sharding(&mesh, &[Some("data"), None]).unwrap();
        metrics::reset();
        for _ in 0..3 {
            w.assign(&(&w * 0.5 + 1.0).tanh());
            mark_step().unwrap();
            // The update stays split as its input was.
            assert_eq!(w.sharding().unwrap().tiles(), &[4, 1]);
        }
        assert_eq!(metrics::counter("UncachedCompile"), 1);
        assert_eq!(metrics::counter("TransferFromDevice"), 0);
        // Each step writes its update into the pieces of the old value,
        // which nothing else holds (XLA only: the reference backend
        // donates nothing).
        assert_eq!(metrics::counter("DonatedBuffer"), donated_on(&mesh, 3));
        assert_close(&w.to_vec::<f32>().unwrap(), &want, 1e-5);
    }
}

backend_test! {
    /// A wrong mesh or spec is an error naming the problem, and the
    /// tensor is still there.
    fn wrong_mesh_and_spec_errors() {
        let d = lazyxla::devices();
        let e = Mesh::new(&d, &[2, 4], &["a", "b"]).err().unwrap().to_string();
        assert!(e.contains("8 devices") && e.contains("4 were given"), "{e}");
        let twice = [d[0].clone(), d[1].clone(), d[0].clone(), d[3].clone()];
        let e = Mesh::new(&twice, &[4], &["a"]).err().unwrap().to_string();
        assert!(e.contains("distinct"), "{e}");
        let e = Mesh::new(&d, &[2, 2], &["a"]).err().unwrap().to_string();
        assert!(e.contains("1 axis names"), "{e}");
        let e = Mesh::new(&d, &[2, 2], &["a", "a"]).err().unwrap().to_string();
        assert!(e.contains("twice"), "{e}");
        let mesh = mesh_2d();
        let x = host(6, &[4, 4]);
        let e = x.mark_sharding(&mesh, &[Some("batch"), None]).err().unwrap().to_string();
        assert!(e.contains("\"batch\"") && e.contains("data"), "{e}");
        let e = x.mark_sharding(&mesh, &[None, None, Some("data")]).err().unwrap().to_string();
        assert!(e.contains("3 entries") && e.contains("rank 2"), "{e}");
        let e = x.mark_sharding(&mesh, &[Some("data"), Some("data")]).err().unwrap().to_string();
        assert!(e.contains("two dims"), "{e}");
        // Nothing lost: the tensor reads as before, and still shards.
        assert_eq!(x.to_vec::<f32>().unwrap(), values(6, 16));
        let ok = x.mark_sharding(&mesh, &[Some("data"), Some("model")]).unwrap();
        assert_eq!(ok.to_vec::<f32>().unwrap(), values(6, 16));
    }
}

backend_test! {
    /// A captured step on the mesh replays the sharded program: the same
    /// values as lazy steps, the update kept split, one compile, and on
    /// XLA each replay writes the update into the old value's pieces.
    fn a_captured_sharded_step_replays_in_place() {
        let mesh = mesh_1d();
        let w0 = host(6, &[8, 4]);
        let mut want = w0.clone();
        let xs: Vec<Tensor> = (0..4).map(|k| host(30 + k, &[8, 4])).collect();
        for x in &xs {
            want = (&want + x).tanh();
        }
        let want = want.to_vec::<f32>().unwrap();
        let w = w0.mark_sharding(&mesh, &[Some("data"), None]).unwrap();
        let mut step = lazyxla::capture(|inputs: &[Tensor]| {
            w.assign(&(&w + &inputs[0]).tanh());
            vec![w.sum()]
        });
        metrics::reset();
        for x in &xs {
            let x = x.mark_sharding(&mesh, &[Some("data"), None]).unwrap();
            step.run(&[x]).unwrap();
            assert_eq!(w.sharding().unwrap().tiles(), &[4, 1]);
        }
        assert_eq!(step.recordings(), 1);
        assert_eq!(metrics::counter("UncachedCompile"), 1);
        // The three replays (the recording holds the first step's graph,
        // so its sync donates nothing).
        assert_eq!(metrics::counter("DonatedBuffer"), donated_on(&mesh, 3));
        assert_close(&w.to_vec::<f32>().unwrap(), &want, 1e-5);
    }
}
