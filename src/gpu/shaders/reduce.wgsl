// One level of a pairwise summation tree over `count` partial arrays of
// `len` floats each, stored back to back: part[s] += part[s + half] for
// s < count - half, with half = ceil(count / 2). Repeated until one is left,
// every output is a balanced binary tree of sums over the partials.

struct Params {
    len: u32,
    half: u32,
    pairs: u32,
    pad: u32,
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
