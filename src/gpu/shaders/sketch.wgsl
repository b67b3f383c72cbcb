// Polynomial sketch feature maps (docs/math/sketches.rst, "The generic sketch
// of degree n" and "TensorSRHT"), f32.
//
// All arrays are row-major: input row r starts at x[r * xs] (xs >= d; the
// Maclaurin map stages extra values after the d inputs). The sketch writes
// columns col..col + D (real) or col..col + 2 D (complex, [Re | Im] blocks)
// of `feat`, rows of `width` floats (col = 0, width = D or 2 D for a plain
// sketch; a Maclaurin map places its degree blocks side by side). Factor j of a degree-n sketch either
// writes its values (first = 1) or multiplies them into `feat` (complex
// products for complex sketches); the last factor also multiplies by
// `scale` = 1 / sqrt(D). Dispatches run in order, so factor j reads what
// factor j - 1 wrote.
//
// `dense_tile` (Gaussian / Rademacher, docs/math/sketches.rst, "The generic
// sketch of degree n"): workgroup `tile` (flat over row tiles x feature tiles)
// computes the 64 x 64 block of projections X W_j^T (project.wgsl; complex
// sketches also the imaginary rows D..2D of W_j). W_j starts at float `w_off`
// of `w`.
//
// `srht_fill` / `srht_gather` (TensorSRHT, docs/math/sketches.rst,
// "TensorSRHT"; same bindings, other meanings): `fill` writes, for every row r
// and block b, the zero-padded row times the factor's sign multipliers into
// tmp[(r B + b) d' + i] (real parts, then imaginary parts after rows B d'
// floats); the host then runs the FWHT kernel over rows of length d'; `gather`
// applies the permutation: value c = b d' + i of the factor is tmp[(r B + b) d'
// + perm[k + i]] with k = (b n + j) d'.

struct Params {
    rows: u32,
    d: u32,
    nf: u32,
    width: u32,
    complex: u32,
    first: u32,
    last: u32,
    scale: f32,
    // dense: offset of W_j, feature tiles; srht: d', blocks, degree n, factor j.
    a: u32,
    b: u32,
    c: u32,
    e: u32,
    xs: u32,
    col: u32,
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> feat: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// Combines the factor value (re, im) into output entry o (and o + nf).
fn combine(o: u32, re: f32, im: f32) {
    var vr = re;
    var vi = im;
    if p.first == 0u {
        let ar = feat[o];
        if p.complex == 1u {
            let ai = feat[o + p.nf];
            vr = ar * re - ai * im;
            vi = ar * im + ai * re;
        } else {
            vr = ar * re;
        }
    }
    if p.last == 1u {
        vr = vr * p.scale;
        vi = vi * p.scale;
    }
    feat[o] = vr;
    if p.complex == 1u {
        feat[o + p.nf] = vi;
    }
}

@compute @workgroup_size(16, 16)
fn dense_tile(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid3: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let tiles_k = p.b;
    let tile = flat_group(wid, nwg);
    let tr0 = (tile / tiles_k) * T;
    let tk0 = (tile % tiles_k) * T;
    if tr0 >= p.rows {
        return;
    }
    let tr = lid3.y;
    let tc = lid3.x;
    let pr = project_tile(lid, tr, tc, tr0, tk0, p.rows, p.d, p.xs, p.nf, p.a, p.complex == 1u);
    for (var q = 0u; q < 4u; q++) {
        let row = tr0 + tr + 16u * q;
        for (var v = 0u; v < 4u; v++) {
            let f = tk0 + tc + 16u * v;
            if row < p.rows && f < p.nf {
                combine(row * p.width + p.col + f, pr.re[q * 4u + v], pr.im[q * 4u + v]);
            }
        }
    }
}

@compute @workgroup_size(256)
fn srht_fill(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    // x: the input rows; w: the multipliers (re then im, each B n d'
    // floats); feat: tmp (re in the first rows B d' floats, then im).
    let dp = p.a;
    let blocks = p.b;
    let len = p.rows * blocks * dp;
    let t = flat_group(wid, nwg) * 256u + lid;
    if t >= len {
        return;
    }
    let i = t % dp;
    let rb = t / dp;
    let b = rb % blocks;
    let r = rb / blocks;
    var vr = 0.0;
    var vi = 0.0;
    if i < p.d {
        let xv = x[r * p.xs + i];
        let k = (b * p.c + p.e) * dp + i;
        vr = xv * w[k];
        if p.complex == 1u {
            vi = xv * w[blocks * p.c * dp + k];
        }
    }
    feat[t] = vr;
    if p.complex == 1u {
        feat[len + t] = vi;
    }
}

@compute @workgroup_size(256)
fn srht_gather(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    // x: tmp after the FWHT (re then im); w: the permutations (as f32,
    // exact below 2^24).
    let dp = p.a;
    let blocks = p.b;
    let t = flat_group(wid, nwg) * 256u + lid;
    if t >= p.rows * p.nf {
        return;
    }
    let c = t % p.nf;
    let r = t / p.nf;
    let b = c / dp;
    let i = c % dp;
    let src = (r * blocks + b) * dp + u32(w[(b * p.c + p.e) * dp + i]);
    var im = 0.0;
    if p.complex == 1u {
        im = x[p.rows * blocks * dp + src];
    }
    combine(r * p.width + p.col + c, x[src], im);
}
