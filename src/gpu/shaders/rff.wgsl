// Random Fourier features (docs/math/fourier.rst, "Feature variants") from
// plain arrays, f32.
//
// X is rows x d, W is m x d (one frequency per row), out is rows x ncols,
// all row-major. Workgroup `tile` (flat over row tiles x feature tiles)
// computes the 64 x 64 block of projections X W^T (project.wgsl), then
//   variant 0 (cos_bias): out[r, j]     = scale * cos(x_r . w_j + phase_j)
//   variant 1 (cos_sin):  out[r, j]     = scale * cos(x_r . w_j),
//                         out[r, m + j] = scale * sin(x_r . w_j).
// sin/cos are evaluated with an explicit Cody-Waite reduction by pi/2 and
// minimax polynomials on [-pi/4, pi/4] (about 1e-7 absolute error), since
// WGSL only bounds the built-ins' error on [-pi, pi] and loosely (2^-11).
// The reduction is exact for |t| < 2^15 pi/2 and off by about 2^-24 |t|
// beyond (the order of t's own f32 rounding), for every finite f32 t.

struct Params {
    rows: u32,
    d: u32,
    m: u32,
    ncols: u32,
    variant: u32,
    scale: f32,
    tiles_k: u32,
    pad: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> phase: array<f32>;
@group(0) @binding(3) var<storage, read_write> feat: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

// (sin t, cos t) for any finite f32 t, with |sin|, |cos| <= 1.
fn sincos(t: f32) -> vec2<f32> {
    var q = round(t * 0.636619772367581343);
    var r = t;
    // The quadrant, q mod 4 accumulated as q - 4 floor(q / 4): exact in f32
    // for every q (a multiple of 4 beyond 2^25), where i32(q) saturates.
    var quad = 0.0;
    // Large arguments (|q| >= 2^15): a step of the reduction below with q
    // beyond its exact range leaves a remainder of about u |r| (u = 2^-24,
    // the rounding of q * P1; the order of the f32 rounding of t itself)
    // instead of one in [-pi/4, pi/4], so the remainder is reduced again,
    // each step shrinking it by about 2^-22: six steps from 2^128. NaN and
    // infinities leave the loop (every comparison with NaN fails).
    for (var step = 0; step < 8 && abs(q) >= 32768.0; step++) {
        quad += q - 4.0 * floor(q * 0.25);
        r = r - q * 1.5703125;
        r = r - q * 4.837512969970703125e-4;
        r = r - q * 7.54978995489188216e-8;
        q = round(r * 0.636619772367581343);
    }
    // pi/2 = P1 + P2 + P3; P1 and P2 have few significant bits, so q * P1
    // and q * P2 are exact for |q| < 2^15.
    r = r - q * 1.5703125;
    r = r - q * 4.837512969970703125e-4;
    r = r - q * 7.54978995489188216e-8;
    quad += q - 4.0 * floor(q * 0.25);
    let z = r * r;
    let s = r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
    let c = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
    switch (i32(quad) & 3) {
        case 0: { return vec2<f32>(s, c); }
        case 1: { return vec2<f32>(c, -s); }
        case 2: { return vec2<f32>(-s, -c); }
        default: { return vec2<f32>(-c, s); }
    }
}

@compute @workgroup_size(16, 16)
fn rff_tile(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid3: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let tile = flat_group(wid, nwg);
    let tr0 = (tile / p.tiles_k) * T;
    let tk0 = (tile % p.tiles_k) * T;
    if tr0 >= p.rows {
        return;
    }
    let tr = lid3.y;
    let tc = lid3.x;
    let acc = project_tile(lid, tr, tc, tr0, tk0, p.rows, p.d, p.d, p.m, 0u, false).re;
    for (var q = 0u; q < 4u; q++) {
        let row = tr0 + tr + 16u * q;
        for (var v = 0u; v < 4u; v++) {
            let f = tk0 + tc + 16u * v;
            if row < p.rows && f < p.m {
                let o = row * p.ncols + f;
                if p.variant == 0u {
                    feat[o] = p.scale * sincos(acc[q * 4u + v] + phase[f]).y;
                } else {
                    let sc = sincos(acc[q * 4u + v]);
                    feat[o] = p.scale * sc.y;
                    feat[o + p.m] = p.scale * sc.x;
                }
            }
        }
    }
}
