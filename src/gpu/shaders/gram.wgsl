// Partial products C = A^T B over the rows of a chunk (Gram accumulation:
// A = B = Phi gives Phi^T Phi, A = Phi and B = y gives Phi^T y).
//
// A is rows x da, B is rows x db (row-major f32). Workgroup (tile, split)
// computes the 64 x 64 output tile `tile` (flat over tiles_i x tiles_j, folded
// in a 2-D grid) over the rows [split * span, (split + 1) * span), each of its
// 16 x 16 threads 4 x 4 outputs, and writes them to part[split].
// With sym = 1 (A = B) only the tiles with tj >= ti are computed.
//
// Blocked summation: the 16 products of one shared-memory step are summed in
// `blk`, 16 blocks in `mid`, the mids in `acc` (span <= 4096 rows gives at
// most 16 of them). An entry's rounding error is then at most
// gamma(1 + 15 + 16 + 16) sum_r |a_ri b_rj| instead of gamma(span); the
// partials of the splits are then summed pairwise (reduce.wgsl) and the
// chunks in f64 on the host.
//
// gram_tile_exact (the sparse GP's K_uf K_fu, whose solves amplify rounding
// by the conditioning of K_uu) keeps each entry as an unevaluated sum
// hi + lo of two floats: every product is split exactly into its rounded
// value and its error by an FMA (where the FMA is fused), every add of the
// rounded value to hi is exact by TwoSum, and the two errors are summed in
// lo. Split z writes hi to part[2 z da db + i db + j] and lo da db floats
// later; reduce_pairs_exact (reduce.wgsl) adds the splits' pairs the same
// way, and the host adds hi + lo in f64. An entry's error is then at most
// about (u + 3 rows u^2) sum |a b| (u = 2^-24; the u is the products'
// rounding where the FMA is not fused) instead of gamma_64 sum |a b|.
//
// gram_jobs (the localized GP, batched over centroids) sums row ranges given
// by a table instead: workgroup z covers rows jobs[2z] .. jobs[2z + 1] (at
// most span rows, all of one centroid) and writes part[offset + z da db ..];
// the caller adds these partials in f64 on the host.

struct Params {
    rows: u32,
    da: u32,
    db: u32,
    span: u32,
    sym: u32,
    tiles_j: u32,
    // First float of the output (gram_jobs; 0 for gram_tile).
    offset: u32,
    // Always 0 (see opaque).
    zero: u32,
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> part: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@group(0) @binding(4) var<storage, read> jobs: array<u32>;

@compute @workgroup_size(16, 16)
fn gram_tile(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid3: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let r_begin = wid.z * p.span;
    tile_sum(flat_group(wid, nwg), wid.z, r_begin, min(r_begin + p.span, p.rows), lid3, lid);
}

@compute @workgroup_size(16, 16)
fn gram_jobs(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid3: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    tile_sum(flat_group(wid, nwg), wid.z, jobs[2u * wid.z], jobs[2u * wid.z + 1u], lid3, lid);
}

@compute @workgroup_size(16, 16)
fn gram_tile_exact(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid3: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let tile = flat_group(wid, nwg);
    let ti = tile / p.tiles_j;
    let tj = tile % p.tiles_j;
    if !tile_needed(ti, tj) {
        return;
    }
    let tr = lid3.y;
    let tc = lid3.x;
    let r_begin = wid.z * p.span;
    let r_end = min(r_begin + p.span, p.rows);
    var hi: array<f32, 16>;
    var lo: array<f32, 16>;
    for (var r0 = r_begin; r0 < r_end; r0 += K) {
        load_step(ti, tj, r0, r_end, lid);
        workgroupBarrier();
        for (var k = 0u; k < K; k++) {
            let av = column_values(k, tr, true);
            let bv = column_values(k, tc, false);
            for (var x = 0u; x < 4u; x++) {
                for (var y = 0u; y < 4u; y++) {
                    let q = x * 4u + y;
                    // TwoProduct: prod + perr = av bv exactly.
                    let prod = opaque(av[x] * bv[y], p.zero);
                    let perr = fma(av[x], bv[y], -prod);
                    // TwoSum: s + serr = hi + prod exactly.
                    let s = opaque(hi[q] + prod, p.zero);
                    let back = opaque(s - hi[q], p.zero);
                    let serr = (hi[q] - (s - back)) + (prod - back);
                    hi[q] = s;
                    lo[q] += serr + perr;
                }
            }
        }
        workgroupBarrier();
    }
    let base = 2u * wid.z * p.da * p.db;
    store_tile(base, ti, tj, tr, tc, hi);
    store_tile(base + p.da * p.db, ti, tj, tr, tc, lo);
}

// Whether output tile (ti, tj) exists and is computed (with sym, only those
// on and above the diagonal).
fn tile_needed(ti: u32, tj: u32) -> bool {
    return ti < (p.da + T - 1u) / T && !(p.sym == 1u && tj < ti);
}

// The 4 values of step k a thread multiplies: columns c, c + 16, c + 32,
// c + 48 of the 64 in tile_a (from_a) or tile_b.
fn column_values(k: u32, c: u32, from_a: bool) -> array<f32, 4> {
    var v: array<f32, 4>;
    for (var x = 0u; x < 4u; x++) {
        let e = k * T + c + 16u * x;
        if from_a {
            v[x] = tile_a[e];
        } else {
            v[x] = tile_b[e];
        }
    }
    return v;
}

// Writes a thread's 4 x 4 outputs `vals` of tile (ti, tj), those inside
// da x db, to part[base + i db + j].
fn store_tile(base: u32, ti: u32, tj: u32, tr: u32, tc: u32, vals: array<f32, 16>) {
    for (var x = 0u; x < 4u; x++) {
        for (var y = 0u; y < 4u; y++) {
            let i = ti * T + tr + 16u * x;
            let j = tj * T + tc + 16u * y;
            if i < p.da && j < p.db {
                part[base + i * p.db + j] = vals[x * 4u + y];
            }
        }
    }
}

// Loads rows [r0, r0 + K) (those below r_end; zeros past it) of the column
// blocks ti of A and tj of B into tile_a and tile_b.
fn load_step(ti: u32, tj: u32, r0: u32, r_end: u32, lid: u32) {
    for (var e = lid; e < K * T; e += 256u) {
        let r = r0 + e / T;
        let ia = ti * T + e % T;
        let jb = tj * T + e % T;
        var va = 0.0;
        var vb = 0.0;
        if r < r_end && ia < p.da {
            va = a[r * p.da + ia];
        }
        if r < r_end && jb < p.db {
            vb = b[r * p.db + jb];
        }
        tile_a[e] = va;
        tile_b[e] = vb;
    }
}

// Output tile `tile` of split z over the rows [r_begin, r_end) (uniform
// across the workgroup: the barriers below need it).
fn tile_sum(tile: u32, z: u32, r_begin: u32, r_end: u32, lid3: vec3<u32>, lid: u32) {
    let ti = tile / p.tiles_j;
    let tj = tile % p.tiles_j;
    if !tile_needed(ti, tj) {
        return;
    }
    let tr = lid3.y;
    let tc = lid3.x;
    var acc: array<f32, 16>;
    var mid: array<f32, 16>;
    var steps = 0u;
    for (var r0 = r_begin; r0 < r_end; r0 += K) {
        load_step(ti, tj, r0, r_end, lid);
        workgroupBarrier();
        var blk: array<f32, 16>;
        for (var k = 0u; k < K; k++) {
            let av = column_values(k, tr, true);
            let bv = column_values(k, tc, false);
            for (var x = 0u; x < 4u; x++) {
                for (var y = 0u; y < 4u; y++) {
                    blk[x * 4u + y] += av[x] * bv[y];
                }
            }
        }
        for (var q = 0u; q < 16u; q++) {
            mid[q] += blk[q];
        }
        steps += 1u;
        if steps % 16u == 0u {
            for (var q = 0u; q < 16u; q++) {
                acc[q] += mid[q];
                mid[q] = 0.0;
            }
        }
        workgroupBarrier();
    }
    for (var q = 0u; q < 16u; q++) {
        acc[q] += mid[q];
    }
    store_tile(p.offset + z * p.da * p.db, ti, tj, tr, tc, acc);
}
