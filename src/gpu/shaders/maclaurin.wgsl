// The fixed columns and the row factor of a Maclaurin map
// (docs/math/maclaurin.rst, "The truncated random map" and "Assembly"), after
// its degree blocks were written by sketch.wgsl.
//
// Input row r (xs = d + 1 floats): x~_r = (x_r - c) / l, then
// s_r = sigma g(x~_r) (computed in f64 on the host). Output rows have
// `width` floats: [constant | h01 linear (d) | degree blocks | zero column];
// columns [0, n_const) get a0 s_r, [n_const, h01_end) get a1 s_r x~_r,
// [h01_end, sketch_end) (the blocks, already times their block scale) are
// multiplied by s_r, the rest is set to 0.

struct Params {
    rows: u32,
    d: u32,
    width: u32,
    n_const: u32,
    h01_end: u32,
    sketch_end: u32,
    a0: f32,
    a1: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> feat: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(256)
fn mac_finish(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = flat_group(wid, nwg) * 256u + lid;
    if t >= p.rows * p.width {
        return;
    }
    let r = t / p.width;
    let c = t % p.width;
    let xs = p.d + 1u;
    let s = x[r * xs + p.d];
    if c < p.n_const {
        feat[t] = p.a0 * s;
    } else if c < p.h01_end {
        feat[t] = p.a1 * s * x[r * xs + c - p.n_const];
    } else if c < p.sketch_end {
        feat[t] = feat[t] * s;
    } else {
        feat[t] = 0.0;
    }
}
