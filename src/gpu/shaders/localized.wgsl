// The localized GP's per-centroid rows (docs/math/localized.rst) for a batch of
// centroids, gathered on the device from the training inputs uploaded once
// per call: row r of the batch is training row i = rows[2r] of the
// neighbourhood of the batch's centroid s = rows[2r + 1] (the centroids'
// index lists concatenated). It writes the staged row that maclaurin.wgsl
// and the sketch kernels read, [x~ | sigma exp(-h |x~|^2)] with
// x~ = xs_i - cen_s (xs and cen already shifted by the map's center and
// divided by l on the host, in f64), and the targets [y_i, 1] of the Gram's
// Phi^T [y | 1].

struct Params {
    rows: u32,
    d: u32,
    sigma: f32,
    // 1/2 for the Gaussian kernel's factor exp(-|x~|^2 / 2), 0 otherwise.
    h: f32,
}

@group(0) @binding(0) var<storage, read> xs: array<f32>;
@group(0) @binding(1) var<storage, read> ys: array<f32>;
@group(0) @binding(2) var<storage, read> cen: array<f32>;
@group(0) @binding(3) var<storage, read> rows: array<u32>;
@group(0) @binding(4) var<storage, read_write> staged: array<f32>;
@group(0) @binding(5) var<storage, read_write> targets: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

@compute @workgroup_size(256)
fn local_gather(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let r = flat_group(wid, nwg) * 256u + lid;
    if r >= p.rows {
        return;
    }
    let i = rows[2u * r];
    let c = rows[2u * r + 1u] * p.d;
    let out = r * (p.d + 1u);
    var sq = 0.0;
    for (var a = 0u; a < p.d; a = a + 1u) {
        let t = xs[i * p.d + a] - cen[c + a];
        staged[out + a] = t;
        sq = sq + t * t;
    }
    staged[out + p.d] = p.sigma * exp(-p.h * sq);
    targets[2u * r] = ys[i];
    targets[2u * r + 1u] = 1.0;
}
