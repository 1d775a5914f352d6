//! A small Mask R-CNN (torchvision's design at a small size): a ResNet
//! backbone at stride 8, a region proposal network (anchors of three
//! sizes and three aspect ratios, objectness and box deltas, top-k before
//! NMS, NMS, the first proposals after it), RoI sampling against the
//! ground truth, RoIAlign, a box head (classes and class-specific box
//! deltas) and a mask head (RoIAlign 14x14, convolutions, a 2x
//! up-sampling, one mask per class).
//!
//! Every count in the step is data-dependent: objects per image,
//! proposals NMS keeps, positive and negative anchors and RoIs. They are
//! dynamic sizes with static bounds, so the whole training step is one
//! program compiled once. Shared by `train_mask_rcnn`, its test and the
//! benchmark.

use crate::resnet::BasicBlock;
use crate::shapes::{Batch, Targets};
use lazyxla::nn::{self, BatchNorm2d, Conv2d, ConvTranspose2d, Linear, Module, Sequential};
use lazyxla::vision::{batched_nms, box_iou, nms, roi_align};
use lazyxla::{no_grad, DType, SymInt, Tensor};

/// The sizes of the model and of its sampling.
#[derive(Clone, Debug)]
pub struct Config {
    /// Image side (square images).
    pub image: usize,
    /// Backbone width (the feature map has twice as many channels).
    pub width: usize,
    /// Foreground classes.
    pub classes: usize,
    /// Anchor sizes in pixels, one set per location with each ratio.
    pub anchor_sizes: Vec<f64>,
    /// Anchor aspect ratios (height / width).
    pub ratios: Vec<f64>,
    /// Proposals kept before and after NMS while training.
    pub pre_nms: usize,
    /// Proposals kept after NMS.
    pub post_nms: usize,
    /// Anchors sampled per image for the RPN loss (half positive at most).
    pub rpn_batch: usize,
    /// RoIs sampled per image for the heads (a quarter positive at most).
    pub roi_batch: usize,
    /// Largest number of objects in an image.
    pub max_objects: usize,
    /// Hidden width of the box head.
    pub representation: usize,
    /// Detections kept per image at inference.
    pub detections: usize,
}

impl Config {
    /// The configuration of the example and the benchmark: 128-pixel
    /// images, a 32-channel feature map at stride 8.
    pub fn example() -> Config {
        Config {
            image: 128,
            width: 16,
            classes: crate::shapes::CLASSES,
            anchor_sizes: vec![16.0, 32.0, 64.0],
            ratios: vec![0.5, 1.0, 2.0],
            pre_nms: 300,
            post_nms: 100,
            rpn_batch: 256,
            roi_batch: 64,
            max_objects: 4,
            representation: 128,
            detections: 20,
        }
    }

    /// A smaller configuration for the test (64-pixel images).
    pub fn small() -> Config {
        Config {
            image: 64,
            width: 8,
            anchor_sizes: vec![12.0, 24.0],
            ratios: vec![1.0],
            pre_nms: 120,
            post_nms: 40,
            rpn_batch: 128,
            roi_batch: 32,
            max_objects: 3,
            representation: 64,
            detections: 10,
            ..Config::example()
        }
    }

    /// Feature-map stride.
    pub const STRIDE: usize = 8;

    fn feature_side(&self) -> usize {
        self.image / Self::STRIDE
    }

    fn anchors_per_location(&self) -> usize {
        self.anchor_sizes.len() * self.ratios.len()
    }

    /// Anchors over the whole feature map.
    pub fn num_anchors(&self) -> usize {
        self.feature_side().pow(2) * self.anchors_per_location()
    }
}

/// torchvision's anchors: at each feature cell `(y, x)` (top-left corner
/// `x * stride, y * stride`), for each ratio and then each size, a box of
/// area `size²` and height/width `ratio`, rounded: `[H·W·A, 4]`, in the
/// order of the RPN head's outputs.
pub fn anchors(cfg: &Config) -> Tensor {
    let mut base = Vec::new();
    for r in &cfg.ratios {
        let (h, w) = (r.sqrt(), 1.0 / r.sqrt());
        for s in &cfg.anchor_sizes {
            let (ws, hs) = (w * s, h * s);
            base.push([-ws / 2.0, -hs / 2.0, ws / 2.0, hs / 2.0].map(|v: f64| v.round() as f32));
        }
    }
    let side = cfg.feature_side();
    let mut out = Vec::with_capacity(side * side * base.len() * 4);
    for y in 0..side {
        for x in 0..side {
            let (sx, sy) = ((x * Config::STRIDE) as f32, (y * Config::STRIDE) as f32);
            for b in &base {
                out.extend([sx + b[0], sy + b[1], sx + b[2], sy + b[3]]);
            }
        }
    }
    Tensor::from_vec(out, &[side * side * base.len(), 4]).unwrap()
}

// ------------------------------------------------------------ boxes

/// Column `k` of boxes or deltas `[.., 4]`.
fn col(b: &Tensor, k: usize) -> Tensor {
    let last = b.rank() - 1;
    b.narrow(last, k, 1).squeeze(last)
}

/// Widths, heights and centres of `[.., 4]` boxes.
fn geometry(b: &Tensor) -> [Tensor; 4] {
    let (x1, y1, x2, y2) = (col(b, 0), col(b, 1), col(b, 2), col(b, 3));
    let (w, h) = (&x2 - &x1, &y2 - &y1);
    let cx = &x1 + &(&w * 0.5);
    let cy = &y1 + &(&h * 0.5);
    [w, h, cx, cy]
}

/// torchvision's `BoxCoder`: deltas of boxes against reference boxes,
/// scaled by `weights`.
pub struct BoxCoder {
    weights: [f64; 4],
}

/// log(1000 / 16): the largest width or height delta decoded.
const DELTA_CLIP: f64 = 4.135_166_556_742_356;

impl BoxCoder {
    /// The deltas that move `reference` onto `target` (both `[n, 4]`).
    pub fn encode(&self, target: &Tensor, reference: &Tensor) -> Tensor {
        let [wx, wy, ww, wh] = self.weights;
        let [rw, rh, rx, ry] = geometry(reference);
        let [tw, th, tx, ty] = geometry(target);
        let dx = (&tx - &rx) / &rw * wx;
        let dy = (&ty - &ry) / &rh * wy;
        let dw = (&tw / &rw).log() * ww;
        let dh = (&th / &rh).log() * wh;
        Tensor::stack(&[&dx, &dy, &dw, &dh], 1)
    }

    /// The boxes `deltas [.., 4]` make of `reference` (broadcast against
    /// the deltas' leading dims).
    pub fn decode(&self, deltas: &Tensor, reference: &Tensor) -> Tensor {
        let [wx, wy, ww, wh] = self.weights;
        let [rw, rh, rx, ry] = geometry(reference);
        let dx = col(deltas, 0) / wx;
        let dy = col(deltas, 1) / wy;
        let dw = (col(deltas, 2) / ww).clamp_max(DELTA_CLIP);
        let dh = (col(deltas, 3) / wh).clamp_max(DELTA_CLIP);
        let (cx, cy) = (&(&dx * &rw) + &rx, &(&dy * &rh) + &ry);
        let (w, h) = (&dw.exp() * &rw, &dh.exp() * &rh);
        let (hw, hh) = (&w * 0.5, &h * 0.5);
        let last = deltas.rank() - 1;
        Tensor::stack(
            &[&(&cx - &hw), &(&cy - &hh), &(&cx + &hw), &(&cy + &hh)],
            last,
        )
    }
}

const RPN_CODER: BoxCoder = BoxCoder { weights: [1.0; 4] };
const ROI_CODER: BoxCoder = BoxCoder {
    weights: [10.0, 10.0, 5.0, 5.0],
};

/// `Σ smooth_l1(pred - target)` with `beta` (torchvision sums and divides
/// by the number of sampled examples itself).
fn smooth_l1_sum(pred: &Tensor, target: &Tensor, beta: f64) -> Tensor {
    let d = (pred - target).abs();
    let quadratic = d.square() * (0.5 / beta);
    let linear = &d - beta * 0.5;
    d.lt_scalar(beta).where_cond(&quadratic, &linear).sum()
}

/// The number of elements along dim 0, as an F32 scalar tensor computed
/// on the device.
fn count(x: &Tensor) -> Tensor {
    Tensor::scalar_sym(&x.size(0)).to_dtype(DType::F32)
}

/// A column of `value` beside boxes `[n, 4]`: RoIs `[n, 5]` of one image.
fn rois(batch_index: &Tensor, boxes: &Tensor) -> Tensor {
    Tensor::cat(&[&batch_index.unsqueeze(1), boxes], 1)
}

/// The positions of `mask`'s true elements among the first `take` of
/// `order` (indices into `mask`): the first `take` in random order.
fn first_true(order: &Tensor, mask: &Tensor, take: usize) -> Tensor {
    let head = order.slice(0, ..take);
    head.masked_select(&mask.index_select(0, &head))
}

/// `order` (I64 indices) sorting `mask`'s true elements first, in the
/// random order of `keys` (uniform in [0, 1)).
fn true_first(mask: &Tensor, keys: &Tensor) -> Tensor {
    (keys + &(mask.logical_not().to_dtype(DType::F32) * 2.0)).argsort(0, false)
}

// ------------------------------------------------------------ modules

/// Stem, `layer1` and `layer2`: `[N, 3, S, S]` to `[N, 2w, S/8, S/8]`.
pub struct Backbone {
    conv1: Conv2d,
    bn1: BatchNorm2d,
    layer1: Sequential,
    layer2: Sequential,
}

impl Backbone {
    fn new(w: usize, seed: u64) -> Backbone {
        Backbone {
            conv1: Conv2d::new(3, w, (3, 3), seed)
                .stride((2, 2))
                .padding((1, 1))
                .bias(false),
            bn1: BatchNorm2d::new(w),
            layer1: Sequential::new().add(BasicBlock::new(w, w, 2, seed + 10)),
            layer2: Sequential::new().add(BasicBlock::new(w, 2 * w, 2, seed + 20)),
        }
    }
}

impl Module for Backbone {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.bn1.forward(&self.conv1.forward(x)).relu();
        self.layer2.forward(&self.layer1.forward(&h))
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        vec![
            ("conv1".into(), &self.conv1),
            ("bn1".into(), &self.bn1),
            ("layer1".into(), &self.layer1),
            ("layer2".into(), &self.layer2),
        ]
    }
}

/// The RPN head: a 3x3 convolution, then objectness and box deltas per
/// anchor (torchvision's `RPNHead`, weights normal with std 0.01).
pub struct RpnHead {
    conv: Conv2d,
    cls_logits: Conv2d,
    bbox_pred: Conv2d,
}

impl RpnHead {
    fn new(c: usize, a: usize, seed: u64) -> RpnHead {
        let head = RpnHead {
            conv: Conv2d::new(c, c, (3, 3), seed).padding((1, 1)),
            cls_logits: Conv2d::new(c, a, (1, 1), seed + 1),
            bbox_pred: Conv2d::new(c, 4 * a, (1, 1), seed + 2),
        };
        init_normal(&head, 0.01, seed + 3);
        head
    }

    /// Objectness `[N, H·W·A]` and deltas `[N, H·W·A, 4]` in anchor order.
    fn run(&self, f: &Tensor) -> (Tensor, Tensor) {
        let t = self.conv.forward(f).relu();
        let n = f.upper_bounds()[0] as i64;
        let obj = self
            .cls_logits
            .forward(&t)
            .permute(&[0, 2, 3, 1])
            .reshape(&[n, -1]);
        let d = self.bbox_pred.forward(&t);
        let (a4, h, w) = (
            d.upper_bounds()[1] as i64,
            d.upper_bounds()[2] as i64,
            d.upper_bounds()[3] as i64,
        );
        let d = d
            .reshape(&[n, a4 / 4, 4, h, w])
            .permute(&[0, 3, 4, 1, 2])
            .reshape(&[n, -1, 4]);
        (obj, d)
    }
}

impl Module for RpnHead {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.run(x).0
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        vec![
            ("conv".into(), &self.conv),
            ("cls_logits".into(), &self.cls_logits),
            ("bbox_pred".into(), &self.bbox_pred),
        ]
    }
}

/// Weights of `m` normal with std `std`, biases zero (torchvision's
/// initialisation of its detection heads).
fn init_normal(m: &dyn Module, std: f64, seed: u64) {
    for (i, (name, p)) in m.named_parameters().into_iter().enumerate() {
        let shape = p.upper_bounds();
        let normal = Tensor::randn(&shape, seed + i as u64)
            .to_vec::<f32>()
            .unwrap();
        let scale = if name.ends_with("bias") {
            0.0
        } else {
            std as f32
        };
        let v: Vec<f32> = normal.iter().map(|x| x * scale).collect();
        // Host data: the parameter stays device data, with nothing to run.
        no_grad(|| p.assign(&Tensor::from_vec(v, &shape).unwrap()));
    }
}

/// The box head (`TwoMLPHead`) and predictor: RoI features `[n, C, 7, 7]`
/// to class logits `[n, K + 1]` and class-specific deltas `[n, 4 (K + 1)]`.
pub struct BoxHead {
    fc6: Linear,
    fc7: Linear,
    cls_score: Linear,
    bbox_pred: Linear,
}

impl BoxHead {
    fn new(c: usize, r: usize, classes: usize, seed: u64) -> BoxHead {
        BoxHead {
            fc6: Linear::new(c * 49, r, seed),
            fc7: Linear::new(r, r, seed + 1),
            cls_score: Linear::new(r, classes + 1, seed + 2),
            bbox_pred: Linear::new(r, 4 * (classes + 1), seed + 3),
        }
    }

    fn run(&self, feats: &Tensor) -> (Tensor, Tensor) {
        let n = feats.size(0);
        let per_roi = feats.upper_bounds()[1..].iter().product::<usize>();
        let x = feats.reshape_sym(&[n, SymInt::from(per_roi)]);
        let x = self.fc7.forward(&self.fc6.forward(&x).relu()).relu();
        (self.cls_score.forward(&x), self.bbox_pred.forward(&x))
    }
}

impl Module for BoxHead {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.run(x).0
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        vec![
            ("fc6".into(), &self.fc6),
            ("fc7".into(), &self.fc7),
            ("cls_score".into(), &self.cls_score),
            ("bbox_pred".into(), &self.bbox_pred),
        ]
    }
}

/// The mask head: two 3x3 convolutions on RoI features `[n, C, 14, 14]`,
/// a 2x transposed convolution and a mask logit per class:
/// `[n, K + 1, 28, 28]`.
pub struct MaskHead {
    mask_fcn1: Conv2d,
    mask_fcn2: Conv2d,
    conv5_mask: ConvTranspose2d,
    mask_fcn_logits: Conv2d,
}

impl MaskHead {
    fn new(c: usize, classes: usize, seed: u64) -> MaskHead {
        MaskHead {
            mask_fcn1: Conv2d::new(c, c, (3, 3), seed).padding((1, 1)),
            mask_fcn2: Conv2d::new(c, c, (3, 3), seed + 1).padding((1, 1)),
            conv5_mask: ConvTranspose2d::new(c, c, (2, 2), seed + 2).stride((2, 2)),
            mask_fcn_logits: Conv2d::new(c, classes + 1, (1, 1), seed + 3),
        }
    }
}

impl Module for MaskHead {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self
            .mask_fcn2
            .forward(&self.mask_fcn1.forward(x).relu())
            .relu();
        self.mask_fcn_logits
            .forward(&self.conv5_mask.forward(&h).relu())
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        vec![
            ("mask_fcn1".into(), &self.mask_fcn1),
            ("mask_fcn2".into(), &self.mask_fcn2),
            ("conv5_mask".into(), &self.conv5_mask),
            ("mask_fcn_logits".into(), &self.mask_fcn_logits),
        ]
    }
}

/// The whole detector.
pub struct MaskRcnn {
    /// Its sizes.
    pub cfg: Config,
    backbone: Backbone,
    rpn: RpnHead,
    box_head: BoxHead,
    mask_head: MaskHead,
    anchors: Tensor,
}

/// The five losses of a training step, each averaged over the images.
pub struct Losses {
    /// RPN objectness (binary cross entropy on the sampled anchors).
    pub objectness: Tensor,
    /// RPN box regression on the positive anchors.
    pub rpn_box: Tensor,
    /// RoI classification (cross entropy on the sampled RoIs).
    pub classifier: Tensor,
    /// RoI box regression on the positive RoIs.
    pub box_reg: Tensor,
    /// Per-pixel binary cross entropy of the positive RoIs' masks.
    pub mask: Tensor,
    /// Positive RoIs per image, `[N]` I64 (for reporting; a count the step
    /// computes on the device).
    pub positives: Tensor,
}

impl Losses {
    /// Their sum, the training loss.
    pub fn total(&self) -> Tensor {
        &(&(&(&self.objectness + &self.rpn_box) + &self.classifier) + &self.box_reg) + &self.mask
    }
}

/// Detections of one image.
pub struct Detections {
    /// `[<=d, 4]` boxes.
    pub boxes: Tensor,
    /// `[<=d]` scores.
    pub scores: Tensor,
    /// `[<=d]` I64 classes.
    pub labels: Tensor,
    /// `[<=d, 28, 28]` mask probabilities inside each box.
    pub masks: Tensor,
}

/// Random keys for one image's sampling (uniform, host-made data: a new
/// draw every step, never a new program).
pub struct Keys {
    anchors: [Tensor; 2],
    rois: [Tensor; 2],
}

impl Keys {
    /// The keys of step `seed`, image `image`.
    pub fn new(cfg: &Config, seed: u64, image: usize) -> Keys {
        let s = seed.wrapping_mul(1_000_003).wrapping_add(image as u64 * 4);
        let rois = cfg.post_nms + cfg.max_objects;
        Keys {
            anchors: [
                Tensor::rand(&[cfg.num_anchors()], s),
                Tensor::rand(&[cfg.num_anchors()], s + 1),
            ],
            rois: [Tensor::rand(&[rois], s + 2), Tensor::rand(&[rois], s + 3)],
        }
    }
}

impl MaskRcnn {
    /// A detector with seeded weights.
    pub fn new(cfg: Config, seed: u64) -> MaskRcnn {
        let c = 2 * cfg.width;
        MaskRcnn {
            backbone: Backbone::new(cfg.width, seed),
            rpn: RpnHead::new(c, cfg.anchors_per_location(), seed + 100),
            box_head: BoxHead::new(c, cfg.representation, cfg.classes, seed + 200),
            mask_head: MaskHead::new(c, cfg.classes, seed + 300),
            anchors: anchors(&cfg),
            cfg,
        }
    }

    /// Proposals of one image: the `pre_nms` best-scored anchors decoded
    /// and clipped, NMS at 0.7, the first `post_nms` kept: `[<=post, 4]`.
    fn proposals(&self, objectness: &Tensor, deltas: &Tensor) -> Tensor {
        no_grad(|| {
            let (scores, top) = objectness.topk(self.cfg.pre_nms, 0, true);
            let boxes = RPN_CODER
                .decode(
                    &deltas.index_select(0, &top),
                    &self.anchors.index_select(0, &top),
                )
                .clamp(0.0, self.cfg.image as f64);
            let keep = nms(&boxes, &scores, 0.7).slice(0, ..self.cfg.post_nms);
            boxes.index_select(0, &keep)
        })
    }

    /// The RPN losses of one image: anchors with IoU >= 0.7 against an
    /// object (or the best for an object) are positive, below 0.3
    /// negative; `rpn_batch` are sampled, half positive at most.
    fn rpn_losses(
        &self,
        objectness: &Tensor,
        deltas: &Tensor,
        gt: &Targets,
        keys: &Keys,
    ) -> (Tensor, Tensor) {
        let (sampled, positives, matched) = no_grad(|| {
            let iou = box_iou(&gt.boxes, &self.anchors); // [<=G, A]
            let best = iou.max_dims(&[0], false); // [A]
            let matched = iou.argmax(0);
            let best_for_gt = iou.max_dims(&[1], true); // [<=G, 1]
            let is_best = iou
                .eq(&best_for_gt)
                .logical_and(&best_for_gt.gt_scalar(0.0))
                .to_dtype(DType::F32)
                .max_dims(&[0], false)
                .gt_scalar(0.5);
            let pos = best.ge_scalar(0.7).logical_or(&is_best);
            let neg = best.lt_scalar(0.3).logical_and(&pos.logical_not());
            let half = self.cfg.rpn_batch / 2;
            let positives = first_true(&true_first(&pos, &keys.anchors[0]), &pos, half);
            let wanted = Tensor::scalar_sym(&(self.cfg.rpn_batch as i64 - positives.size(0)));
            let order = true_first(&neg, &keys.anchors[1]).slice(0, ..self.cfg.rpn_batch);
            let rank = Tensor::arange(self.cfg.rpn_batch as i64);
            let take = neg.index_select(0, &order).logical_and(&rank.lt(&wanted));
            let negatives = order.masked_select(&take);
            (
                Tensor::cat(&[&positives, &negatives], 0),
                positives,
                matched,
            )
        });
        let labels = no_grad(|| {
            let n = Tensor::ones_sym(&[positives.size(0)], DType::F32);
            let z = Tensor::zeros_sym(&[sampled.size(0) - positives.size(0)], DType::F32);
            Tensor::cat(&[&n, &z], 0)
        });
        let obj =
            nn::binary_cross_entropy_with_logits(&objectness.index_select(0, &sampled), &labels);
        let target = no_grad(|| {
            let gt_boxes = gt
                .boxes
                .index_select(0, &matched.index_select(0, &positives));
            RPN_CODER.encode(&gt_boxes, &self.anchors.index_select(0, &positives))
        });
        let pred = deltas.index_select(0, &positives);
        let reg = smooth_l1_sum(&pred, &target, 1.0 / 9.0) / &count(&sampled);
        (obj, reg)
    }

    /// The box and mask losses of image `b`: its proposals and its ground
    /// truth boxes are matched to the objects (IoU >= 0.5 positive, below
    /// negative), `roi_batch` are sampled, a quarter positive at most.
    fn roi_losses(
        &self,
        features: &Tensor,
        b: usize,
        proposals: &Tensor,
        gt: &Targets,
        keys: &Keys,
    ) -> (Tensor, Tensor, Tensor, SymInt) {
        let cfg = &self.cfg;
        let candidates = Tensor::cat(&[proposals, &gt.boxes], 0); // [<=P + G, 4]
        let (sampled, positives, matched) = no_grad(|| {
            let iou = box_iou(&candidates, &gt.boxes); // [<=P+G, <=G]
            let best = iou.max_dims(&[1], false);
            let matched = iou.argmax(1);
            let pos = best.ge_scalar(0.5);
            let neg = pos.logical_not();
            let n = Tensor::arange_sym(&candidates.size(0));
            let keys0 = keys.rois[0].index_select(0, &n);
            let keys1 = keys.rois[1].index_select(0, &n);
            let positives = first_true(&true_first(&pos, &keys0), &pos, cfg.roi_batch / 4);
            let wanted = Tensor::scalar_sym(&(cfg.roi_batch as i64 - positives.size(0)));
            let order = true_first(&neg, &keys1).slice(0, ..cfg.roi_batch);
            let rank = Tensor::arange_sym(&order.size(0));
            let take = neg.index_select(0, &order).logical_and(&rank.lt(&wanted));
            let negatives = order.masked_select(&take);
            (
                Tensor::cat(&[&positives, &negatives], 0),
                positives,
                matched,
            )
        });
        let (boxes, labels, first, pos_boxes, pos_gt) = no_grad(|| {
            let boxes = candidates.index_select(0, &sampled);
            let pos_gt = matched.index_select(0, &positives);
            let labels = Tensor::cat(
                &[
                    &gt.labels.index_select(0, &pos_gt),
                    &Tensor::zeros_sym(&[sampled.size(0) - positives.size(0)], DType::I64),
                ],
                0,
            );
            let first = Tensor::arange_sym(&positives.size(0));
            let pos_boxes = boxes.index_select(0, &first);
            (boxes, labels, first, pos_boxes, pos_gt)
        });
        let index = Tensor::full_sym(&[sampled.size(0)], b as f64, DType::F32);
        let feats = roi_align(features, &rois(&index, &boxes), (7, 7), 0.125, 2, false);
        let (logits, deltas) = self.box_head.run(&feats);
        let classifier = nn::cross_entropy(&logits, &labels);
        // The deltas of each positive RoI's own class.
        let pos_labels = labels.index_select(0, &first);
        let one_hot = pos_labels.one_hot(cfg.classes + 1).to_dtype(DType::F32);
        let pos_deltas = deltas.index_select(0, &first).reshape_sym(&[
            first.size(0),
            SymInt::from(cfg.classes as i64 + 1),
            SymInt::from(4),
        ]);
        let pred = (&pos_deltas * &one_hot.unsqueeze(2)).sum_dims(&[1], false);
        let target = no_grad(|| ROI_CODER.encode(&gt.boxes.index_select(0, &pos_gt), &pos_boxes));
        let box_reg = smooth_l1_sum(&pred, &target, 1.0 / 9.0) / &count(&sampled);
        // Masks: the positive RoIs' own class, against the object's mask
        // resampled into the RoI.
        let pos_index = Tensor::full_sym(&[positives.size(0)], b as f64, DType::F32);
        let mask_feats = roi_align(
            features,
            &rois(&pos_index, &pos_boxes),
            (14, 14),
            0.125,
            2,
            false,
        );
        let mask_logits = self.mask_head.forward(&mask_feats); // [<=n, K+1, 28, 28]
        let picked = (&mask_logits * &one_hot.unsqueeze(2).unsqueeze(3)).sum_dims(&[1], false);
        let target = no_grad(|| {
            // The objects' masks as a static batch (their bound), each RoI
            // reading its own object's.
            let masks = gt.masks.pad_to_bound(0.0).unsqueeze(1);
            let which = pos_gt.to_dtype(DType::F32);
            roi_align(&masks, &rois(&which, &pos_boxes), (28, 28), 1.0, 2, false).squeeze(1)
        });
        let mask = nn::binary_cross_entropy_with_logits(&picked, &target);
        (classifier, box_reg, mask, positives.size(0))
    }

    /// Records the losses of one training step on `batch` (nothing runs).
    pub fn losses(&self, batch: &Batch, keys: &[Keys]) -> Losses {
        let features = self.backbone.forward(&batch.images);
        let (objectness, deltas) = self.rpn.run(&features);
        let mut parts: Vec<[Tensor; 5]> = Vec::new();
        let mut positives = Vec::new();
        for (b, gt) in batch.targets.iter().enumerate() {
            let obj = objectness.narrow(0, b, 1).squeeze(0);
            let d = deltas.narrow(0, b, 1).squeeze(0);
            let (rpn_obj, rpn_box) = self.rpn_losses(&obj, &d, gt, &keys[b]);
            let props = self.proposals(&obj, &d);
            let (cls, reg, mask, pos) = self.roi_losses(&features, b, &props, gt, &keys[b]);
            parts.push([rpn_obj, rpn_box, cls, reg, mask]);
            positives.push(Tensor::scalar_sym(&pos));
        }
        let mean = |k: usize| {
            let refs: Vec<&Tensor> = parts.iter().map(|p| &p[k]).collect();
            Tensor::stack(&refs, 0).mean()
        };
        Losses {
            objectness: mean(0),
            rpn_box: mean(1),
            classifier: mean(2),
            box_reg: mean(3),
            mask: mean(4),
            positives: Tensor::stack(&positives.iter().collect::<Vec<_>>(), 0),
        }
    }

    /// Detections of every image of `images` (run it in evaluation mode,
    /// under `no_grad`): class scores of the proposals, class-specific
    /// boxes, scores above 0.05, NMS at 0.5 per class, the best
    /// `detections`, and their masks.
    pub fn detect(&self, images: &Tensor) -> Vec<Detections> {
        let cfg = &self.cfg;
        let features = self.backbone.forward(images);
        let (objectness, deltas) = self.rpn.run(&features);
        let k = cfg.classes;
        (0..images.upper_bounds()[0])
            .map(|b| {
                let obj = objectness.narrow(0, b, 1).squeeze(0);
                let d = deltas.narrow(0, b, 1).squeeze(0);
                let props = self.proposals(&obj, &d); // [<=P, 4]
                let index = Tensor::full_sym(&[props.size(0)], b as f64, DType::F32);
                let feats = roi_align(&features, &rois(&index, &props), (7, 7), 0.125, 2, false);
                let (logits, deltas) = self.box_head.run(&feats);
                let n = props.size(0);
                let scores = logits.softmax(1).narrow(1, 1, k); // [<=P, K]
                let deltas = deltas
                    .reshape_sym(&[n.clone(), SymInt::from(k as i64 + 1), SymInt::from(4)])
                    .narrow(1, 1, k);
                let boxes = ROI_CODER
                    .decode(&deltas, &props.unsqueeze(1))
                    .clamp(0.0, cfg.image as f64); // [<=P, K, 4]
                let classes = (Tensor::arange(k as i64) + 1)
                    .unsqueeze(0)
                    .expand(&[n.clone(), SymInt::from(k as i64)]);
                let flat = |t: &Tensor| t.reshape_sym(&[n.clone() * k as i64]);
                let (scores, classes) = (flat(&scores), flat(&classes));
                let boxes = boxes.reshape_sym(&[n.clone() * k as i64, SymInt::from(4)]);
                let sure = scores.gt_scalar(0.05).nonzero().flatten();
                let (boxes, scores, classes) = (
                    boxes.index_select(0, &sure),
                    scores.index_select(0, &sure),
                    classes.index_select(0, &sure),
                );
                let keep = batched_nms(&boxes, &scores, &classes, 0.5).slice(0, ..cfg.detections);
                let (boxes, scores, labels) = (
                    boxes.index_select(0, &keep),
                    scores.index_select(0, &keep),
                    classes.index_select(0, &keep),
                );
                let index = Tensor::full_sym(&[boxes.size(0)], b as f64, DType::F32);
                let mask_feats =
                    roi_align(&features, &rois(&index, &boxes), (14, 14), 0.125, 2, false);
                let one_hot = labels.one_hot(k + 1).to_dtype(DType::F32);
                let masks = (&self.mask_head.forward(&mask_feats)
                    * &one_hot.unsqueeze(2).unsqueeze(3))
                    .sum_dims(&[1], false)
                    .sigmoid();
                Detections {
                    boxes,
                    scores,
                    labels,
                    masks,
                }
            })
            .collect()
    }
}

impl Module for MaskRcnn {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.backbone.forward(x)
    }

    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        vec![
            ("backbone".into(), &self.backbone),
            ("rpn".into(), &self.rpn),
            ("box_head".into(), &self.box_head),
            ("mask_head".into(), &self.mask_head),
        ]
    }
}
