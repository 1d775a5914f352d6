//! A convolutional variational autoencoder for 28x28 images, written as
//! the PyTorch original (parameter names `conv1`, `conv2`, `fc_mu`,
//! `fc_logvar`, `fc_dec`, `deconv1`, `deconv2`), and a seeded synthetic
//! image set; shared by `train_vae`, the `small_models` benchmark (whose
//! PyTorch side, `benches/peers/gcn_vae_torch.py`, draws the same images
//! by the same rule) and the PyTorch fixture test.
//!
//! Encoder: two 4x4 stride-2 convolutions (28 → 14 → 7) with ReLU, the
//! features flattened to `mu` and `logvar`. Reparameterisation: `z = mu +
//! eps · exp(logvar / 2)` with `eps` drawn on the device (`randn_like`), so
//! every step draws new noise in the same program. Decoder: a linear map
//! back to `[c2, 7, 7]` and two 4x4 stride-2 transposed convolutions (7 →
//! 14 → 28), ReLU between, a sigmoid at the end. The loss is the summed
//! binary cross entropy of the reconstruction plus the KL divergence.

#![allow(dead_code)]

use lazyxla::nn::{self, Conv2d, ConvTranspose2d, Linear, Module};
use lazyxla::{SymInt, Tensor};

/// Image side.
pub const SIDE: usize = 28;

/// The widths of a VAE.
#[derive(Clone, Copy, Debug)]
pub struct VaeConfig {
    /// Channels after the first and second convolution.
    pub c1: usize,
    pub c2: usize,
    /// The latent size.
    pub latent: usize,
}

/// The usual MNIST widths: 32 and 64 channels, 20 latent dims.
pub const FULL: VaeConfig = VaeConfig {
    c1: 32,
    c2: 64,
    latent: 20,
};

/// The VAE.
pub struct Vae {
    cfg: VaeConfig,
    conv1: Conv2d,
    conv2: Conv2d,
    fc_mu: Linear,
    fc_logvar: Linear,
    fc_dec: Linear,
    deconv1: ConvTranspose2d,
    deconv2: ConvTranspose2d,
}

impl Vae {
    /// PyTorch's default initialisations, from `seed`.
    pub fn new(cfg: VaeConfig, seed: u64) -> Vae {
        let flat = cfg.c2 * 7 * 7;
        let down = |i, o, s| Conv2d::new(i, o, (4, 4), s).stride((2, 2)).padding((1, 1));
        let up = |i, o, s| {
            ConvTranspose2d::new(i, o, (4, 4), s)
                .stride((2, 2))
                .padding((1, 1))
        };
        Vae {
            cfg,
            conv1: down(1, cfg.c1, seed),
            conv2: down(cfg.c1, cfg.c2, seed + 1),
            fc_mu: Linear::new(flat, cfg.latent, seed + 2),
            fc_logvar: Linear::new(flat, cfg.latent, seed + 3),
            fc_dec: Linear::new(cfg.latent, flat, seed + 4),
            deconv1: up(cfg.c2, cfg.c1, seed + 5),
            deconv2: up(cfg.c1, 1, seed + 6),
        }
    }

    /// `(mu, logvar)`, each `[B, latent]`, of images `[B, 1, 28, 28]`.
    pub fn encode(&self, x: &Tensor) -> (Tensor, Tensor) {
        let h = self.conv1.forward(x).relu();
        let h = self.conv2.forward(&h).relu().flatten_dims(1, -1);
        (self.fc_mu.forward(&h), self.fc_logvar.forward(&h))
    }

    /// `mu + eps · exp(logvar / 2)`; `eps` drawn on the device when not
    /// given.
    pub fn reparameterize(&self, mu: &Tensor, logvar: &Tensor, eps: Option<&Tensor>) -> Tensor {
        let std = (logvar * 0.5).exp();
        let eps = match eps {
            Some(e) => e.clone(),
            None => std.randn_like(),
        };
        mu + &(&eps * &std)
    }

    /// Images `[B, 1, 28, 28]` (probabilities) from latents `[B, latent]`.
    pub fn decode(&self, z: &Tensor) -> Tensor {
        let h = self.fc_dec.forward(z).relu();
        let c2 = SymInt::from(self.cfg.c2 as i64);
        let h = h.reshape_sym(&[z.size(0), c2, 7.into(), 7.into()]);
        let h = self.deconv1.forward(&h).relu();
        self.deconv2.forward(&h).sigmoid()
    }

    /// `(reconstruction, mu, logvar)`, as the original's `forward`.
    pub fn forward_parts(&self, x: &Tensor, eps: Option<&Tensor>) -> (Tensor, Tensor, Tensor) {
        let (mu, logvar) = self.encode(x);
        let z = self.reparameterize(&mu, &logvar, eps);
        (self.decode(&z), mu, logvar)
    }
}

impl Module for Vae {
    /// The reconstruction of `x`.
    fn forward(&self, x: &Tensor) -> Tensor {
        self.forward_parts(x, None).0
    }

    /// `[x]` or `[x, eps]` to `[reconstruction, mu, logvar]`.
    fn forward_many(&self, inputs: &[Tensor]) -> Vec<Tensor> {
        let (r, mu, logvar) = match inputs {
            [x] => self.forward_parts(x, None),
            [x, eps] => self.forward_parts(x, Some(eps)),
            _ => panic!(
                "Vae::forward_many takes [x] or [x, eps], got {} tensors",
                inputs.len()
            ),
        };
        vec![r, mu, logvar]
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        vec![
            ("conv1".into(), &self.conv1),
            ("conv2".into(), &self.conv2),
            ("fc_mu".into(), &self.fc_mu),
            ("fc_logvar".into(), &self.fc_logvar),
            ("fc_dec".into(), &self.fc_dec),
            ("deconv1".into(), &self.deconv1),
            ("deconv2".into(), &self.deconv2),
        ]
    }
}

/// The original's loss: the summed binary cross entropy of the
/// reconstruction against the images plus the KL divergence of
/// `N(mu, exp(logvar))` from `N(0, 1)`, `-1/2 · Σ(1 + logvar - mu² -
/// exp(logvar))`.
pub fn loss(recon: &Tensor, x: &Tensor, mu: &Tensor, logvar: &Tensor) -> Tensor {
    let bce = nn::binary_cross_entropy(recon, x, nn::Reduction::Sum);
    let kld = (&(&(logvar + 1.0) - &mu.square()) - &logvar.exp()).sum() * -0.5;
    &bce + &kld
}

/// A seeded xorshift64 generator; `benches/peers/gcn_vae_torch.py`
/// implements the same one.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A uniform integer in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_f64() * n as f64) as usize
    }
}

/// `count` images `[count, 1, 28, 28]` (row-major host data, values in
/// `[0, 1]`) from `seed`: each of one to three shapes, a disc or a
/// rectangle at a random place and size, painted at a brightness in
/// `[0.5, 1)` (the brightest shape wins where they overlap).
pub fn images(count: usize, seed: u64) -> Vec<f32> {
    let mut r = Rng(seed.max(1));
    let mut out = vec![0.0f32; count * SIDE * SIDE];
    for img in out.chunks_mut(SIDE * SIDE) {
        for _ in 0..1 + r.below(3) {
            let disc = r.below(2) == 0;
            let (cx, cy) = (4 + r.below(20), 4 + r.below(20));
            let (rx, ry) = (2 + r.below(6), 2 + r.below(6));
            let v = 0.5 + 0.5 * r.next_f64();
            for y in 0..SIDE {
                for x in 0..SIDE {
                    let (dx, dy) = (x.abs_diff(cx), y.abs_diff(cy));
                    let inside = if disc {
                        dx * dx + dy * dy <= rx * rx
                    } else {
                        dx <= rx && dy <= ry
                    };
                    if inside {
                        let p = &mut img[y * SIDE + x];
                        *p = p.max(v as f32);
                    }
                }
            }
        }
    }
    out
}
