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

// (sin t, cos t).
fn sincos(t: f32) -> vec2<f32> {
    let q = round(t * 0.636619772367581343);
    // pi/2 = P1 + P2 + P3; P1 and P2 have few significant bits, so q * P1
    // and q * P2 are exact for |q| < 2^15.
    var r = t - q * 1.5703125;
    r = r - q * 4.837512969970703125e-4;
    r = r - q * 7.54978995489188216e-8;
    let z = r * r;
    let s = r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
    let c = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
    switch (i32(q) & 3) {
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
