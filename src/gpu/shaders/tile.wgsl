// Prelude of every kernel (prepended at pipeline build time by
// src/gpu/context.rs): the flat workgroup index, and the tile geometry and
// workgroup memory of the tiled products (rff.wgsl, sketch.wgsl through
// project.wgsl, and gram.wgsl): 64 x 64 output tiles computed by 16 x 16
// threads, 4 x 4 outputs each, in shared-memory steps of K = 16.

const T: u32 = 64u;
const K: u32 = 16u;

var<workgroup> tile_a: array<f32, 1024>;
var<workgroup> tile_b: array<f32, 1024>;
var<workgroup> tile_c: array<f32, 1024>;

// The flat index of a workgroup: a count folded into a 2-D grid (see
// Context::dispatch) is unfolded as wid.x + wid.y * nwg.x.
fn flat_group(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}

// x itself, through an integer operation with a runtime 0 (`zero`, always 0)
// that the shader compiler cannot see through: without it, a compiler free
// to treat float arithmetic as real arithmetic (SPIR-V without
// NoContraction, which WGSL cannot ask for) may fold (hi + prod) - hi into
// prod, and the errors of TwoSum and TwoProduct into 0 (gram.wgsl,
// reduce.wgsl).
fn opaque(x: f32, zero: u32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) ^ zero);
}
