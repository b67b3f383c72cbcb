// Batched fast Walsh-Hadamard transform (docs/math/fwht.rst), f32.
//
// The chunk is `total` = rows * n floats, row-major, n a power of two.
// `fwht_block`: each workgroup loads BLOCK contiguous floats (whole rows when
// n <= BLOCK) into workgroup memory, runs the butterfly stages of stride
// h < span (span = min(n, BLOCK)) there and writes back times `scale`.
// `fwht_stage`: one butterfly stage of stride h = span >= BLOCK through global
// memory (the stages of an FWHT commute, so the low strides run first).
// Workgroups are numbered flat over a 2-D grid (flat_group, tile.wgsl).

struct Params {
    total: u32,
    span: u32,
    scale: f32,
    pad: u32,
}

@group(0) @binding(0) var<storage, read_write> data: array<f32>;
@group(0) @binding(1) var<uniform> p: Params;

const BLOCK: u32 = {BLOCK}u;
const WG: u32 = 256u;

var<workgroup> sh: array<f32, BLOCK>;

@compute @workgroup_size(256)
fn fwht_block(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let base = flat_group(wid, nwg) * BLOCK;
    if base >= p.total {
        return;
    }
    for (var i = lid; i < BLOCK; i += WG) {
        var v = 0.0;
        if base + i < p.total {
            v = data[base + i];
        }
        sh[i] = v;
    }
    workgroupBarrier();
    for (var h = 1u; h < p.span; h *= 2u) {
        for (var t = lid; t < BLOCK / 2u; t += WG) {
            let i = (t / h) * 2u * h + (t % h);
            let a = sh[i];
            let b = sh[i + h];
            sh[i] = a + b;
            sh[i + h] = a - b;
        }
        workgroupBarrier();
    }
    for (var i = lid; i < BLOCK; i += WG) {
        if base + i < p.total {
            data[base + i] = sh[i] * p.scale;
        }
    }
}

@compute @workgroup_size(256)
fn fwht_stage(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = flat_group(wid, nwg) * WG + lid;
    if t >= p.total / 2u {
        return;
    }
    let h = p.span;
    let i = (t / h) * 2u * h + (t % h);
    let a = data[i];
    let b = data[i + h];
    data[i] = a + b;
    data[i + h] = a - b;
}
