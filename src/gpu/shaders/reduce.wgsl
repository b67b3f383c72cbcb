// One level of a pairwise summation tree over `count` partial arrays of
// `len` floats each, stored back to back: part[s] += part[s + half] for
// s < count - half, with half = ceil(count / 2). Repeated until one is left,
// every output is a balanced binary tree of sums over the partials.
//
// reduce_pairs_exact does the same for the hi + lo pairs of gram_tile_exact
// (partial s: hi at part[2 s len], lo len floats later): the his are added
// by TwoSum, its error and both los go to lo.

struct Params {
    len: u32,
    half: u32,
    pairs: u32,
    // Always 0 (see opaque in tile.wgsl).
    zero: u32,
}

@group(0) @binding(0) var<storage, read_write> part: array<f32>;
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(256)
fn reduce_pairs(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = flat_group(wid, nwg) * 256u + lid;
    if t >= p.pairs * p.len {
        return;
    }
    let s = t / p.len;
    let e = t % p.len;
    part[s * p.len + e] += part[(s + p.half) * p.len + e];
}

@compute @workgroup_size(256)
fn reduce_pairs_exact(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = flat_group(wid, nwg) * 256u + lid;
    if t >= p.pairs * p.len {
        return;
    }
    let s = t / p.len;
    let e = t % p.len;
    let a = 2u * s * p.len + e;
    let b = 2u * (s + p.half) * p.len + e;
    let x = part[a];
    let y = part[b];
    let sum = opaque(x + y, p.zero);
    let back = opaque(sum - x, p.zero);
    let err = (x - (sum - back)) + (y - back);
    part[a] = sum;
    part[a + p.len] = part[a + p.len] + part[b + p.len] + err;
}
