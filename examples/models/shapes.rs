//! A seeded synthetic detection set: squares, disks and triangles of
//! random colours and sizes on a noisy background, with their boxes,
//! classes and masks, and a different number of objects in every image.
//! Shared by `train_mask_rcnn`, its test and its benchmark (the PyTorch
//! side of the benchmark reads the same images from a file it writes).

use lazyxla::Tensor;

/// Foreground classes (1, 2, 3; 0 is the background).
pub const CLASSES: usize = 3;

/// One image with its objects.
pub struct Sample {
    /// `[3, size, size]`, row-major.
    pub image: Vec<f32>,
    /// `x1, y1, x2, y2` per object, in pixels (x2, y2 exclusive).
    pub boxes: Vec<[f32; 4]>,
    /// Class per object, in `1..=CLASSES`.
    pub labels: Vec<i64>,
    /// `[objects, size, size]`: 1.0 on the object's pixels.
    pub masks: Vec<f32>,
}

/// The image `seed` of side `size` with between 1 and `max_objects`
/// objects whose boxes overlap little (IoU below 0.2), so every object is
/// visible and its mask is whole.
pub fn sample(size: usize, max_objects: usize, seed: u64) -> Sample {
    let mut g = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5eed);
    let mut image: Vec<f32> = (0..3 * size * size)
        .map(|_| (0.3 * g.next()) as f32)
        .collect();
    let count = 1 + (g.next() * max_objects as f64) as usize % max_objects;
    let (mut boxes, mut labels, mut masks) = (Vec::new(), Vec::new(), Vec::new());
    let min = (size as f64 * 0.15).max(8.0);
    let max = size as f64 * 0.45;
    let mut tries = 0;
    while boxes.len() < count && tries < 100 {
        tries += 1;
        let side = min + g.next() * (max - min);
        let (x0, y0) = (
            g.next() * (size as f64 - side),
            g.next() * (size as f64 - side),
        );
        let b = [
            x0.floor() as f32,
            y0.floor() as f32,
            (x0 + side).ceil() as f32,
            (y0 + side).ceil() as f32,
        ];
        if boxes.iter().any(|o| iou(o, &b) > 0.2) {
            continue;
        }
        let class = 1 + (g.next() * CLASSES as f64) as usize % CLASSES;
        let colour: Vec<f32> = (0..3).map(|_| (0.45 + 0.55 * g.next()) as f32).collect();
        let mut mask = vec![0.0f32; size * size];
        let (cx, cy, r) = (x0 + side / 2.0, y0 + side / 2.0, side / 2.0);
        for y in b[1] as usize..b[3] as usize {
            for x in b[0] as usize..b[2] as usize {
                let (px, py) = (x as f64 + 0.5, y as f64 + 0.5);
                let inside = match class {
                    1 => (px - cx).abs() <= r * 0.85 && (py - cy).abs() <= r * 0.85,
                    2 => (px - cx).powi(2) + (py - cy).powi(2) <= r * r,
                    _ => {
                        // Apex at the top, base at the bottom.
                        let t = (py - (cy - r)) / (2.0 * r);
                        (0.0..=1.0).contains(&t) && (px - cx).abs() <= r * t
                    }
                };
                if inside {
                    mask[y * size + x] = 1.0;
                    for (c, tint) in colour.iter().enumerate() {
                        image[(c * size + y) * size + x] = tint + (0.15 * g.next()) as f32;
                    }
                }
            }
        }
        // The box is the mask's extent, as datasets derive it.
        let tight = extent(&mask, size).unwrap_or(b);
        boxes.push(tight);
        labels.push(class as i64);
        masks.extend(mask);
    }
    Sample {
        image,
        boxes,
        labels,
        masks,
    }
}

/// `[x1, y1, x2, y2]` of the nonzero pixels of a `size x size` mask.
fn extent(mask: &[f32], size: usize) -> Option<[f32; 4]> {
    let mut b = [f32::MAX, f32::MAX, f32::MIN, f32::MIN];
    for (i, &m) in mask.iter().enumerate() {
        if m > 0.0 {
            let (x, y) = ((i % size) as f32, (i / size) as f32);
            b = [
                b[0].min(x),
                b[1].min(y),
                b[2].max(x + 1.0),
                b[3].max(y + 1.0),
            ];
        }
    }
    (b[0] <= b[2]).then_some(b)
}

/// IoU of two `x1, y1, x2, y2` boxes.
pub fn iou(a: &[f32; 4], b: &[f32; 4]) -> f32 {
    let w = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let h = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = w * h;
    let area = |x: &[f32; 4]| (x[2] - x[0]) * (x[3] - x[1]);
    inter / (area(a) + area(b) - inter)
}

/// A batch as the training step takes it: images `[n, 3, size, size]`
/// and, per image, its boxes `[<=max, 4]`, labels `[<=max]` (I64) and
/// masks `[<=max, size, size]`, all three sharing one dynamic size.
pub struct Batch {
    /// The images.
    pub images: Tensor,
    /// Per image: boxes, labels and masks.
    pub targets: Vec<Targets>,
}

/// The ground truth of one image.
pub struct Targets {
    /// `[<=max, 4]` F32 boxes.
    pub boxes: Tensor,
    /// `[<=max]` I64 classes.
    pub labels: Tensor,
    /// `[<=max, size, size]` F32 masks.
    pub masks: Tensor,
}

/// Images `first..first + n` as a [`Batch`].
pub fn batch(size: usize, max_objects: usize, first: u64, n: usize) -> Batch {
    let samples: Vec<Sample> = (0..n as u64)
        .map(|i| sample(size, max_objects, first + i))
        .collect();
    let images: Vec<f32> = samples.iter().flat_map(|s| s.image.clone()).collect();
    let targets = samples
        .iter()
        .map(|s| targets(s, size, max_objects))
        .collect();
    Batch {
        images: Tensor::from_vec(images, &[n, 3, size, size]).unwrap(),
        targets,
    }
}

/// One sample's ground truth as dynamic tensors (one size variable).
pub fn targets(s: &Sample, size: usize, max_objects: usize) -> Targets {
    let g = s.boxes.len();
    let boxes = Tensor::from_vec(s.boxes.concat(), &[g, 4])
        .unwrap()
        .mark_dynamic(0, max_objects);
    let labels = Tensor::from_vec(s.labels.clone(), &[g])
        .unwrap()
        .mark_dynamic_as(0, &boxes, 0);
    let masks = Tensor::from_vec(s.masks.clone(), &[g, size, size])
        .unwrap()
        .mark_dynamic_as(0, &boxes, 0);
    Targets {
        boxes,
        labels,
        masks,
    }
}

/// A tiny seeded generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}
