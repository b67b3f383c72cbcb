// The tiled projection X W^T shared by rff.wgsl and sketch.wgsl (prepended
// after tile.wgsl; it reads the module's `x` and `w` bindings).

// The 4 x 4 projections of one thread: real parts and, for complex
// weights, imaginary parts; entry 4 q + v is row tr + 16 q, feature tc + 16 v.
struct Proj {
    re: array<f32, 16>,
    im: array<f32, 16>,
}

// Projections x_r . w_f of the tile of rows tr0 .. tr0 + 63 and features
// tk0 .. tk0 + 63 for thread (tr, tc) (local index lid). Row r of the input
// is x[r * xs .. r * xs + d]; feature f is w[w_off + f * d ..][..d], its
// imaginary part (when `complex`) w[w_off + (m + f) * d ..][..d]. Rows
// >= rows and features >= m read as zeros. Called in uniform control flow.
fn project_tile(
    lid: u32,
    tr: u32,
    tc: u32,
    tr0: u32,
    tk0: u32,
    rows: u32,
    d: u32,
    xs: u32,
    m: u32,
    w_off: u32,
    complex: bool,
) -> Proj {
    var o: Proj;
    for (var k0 = 0u; k0 < d; k0 += K) {
        // Thread e loads element (e / K, e % K): 16 consecutive floats of a row.
        for (var e = lid; e < K * T; e += 256u) {
            let rr = e / K;
            let k = e % K;
            let col = k0 + k;
            let row = tr0 + rr;
            let f = tk0 + rr;
            var vx = 0.0;
            var vr = 0.0;
            var vi = 0.0;
            if row < rows && col < d {
                vx = x[row * xs + col];
            }
            if f < m && col < d {
                vr = w[w_off + f * d + col];
                if complex {
                    vi = w[w_off + (m + f) * d + col];
                }
            }
            tile_a[k * T + rr] = vx;
            tile_b[k * T + rr] = vr;
            tile_c[k * T + rr] = vi;
        }
        workgroupBarrier();
        for (var k = 0u; k < K; k++) {
            var xv: array<f32, 4>;
            var wr: array<f32, 4>;
            var wi: array<f32, 4>;
            for (var q = 0u; q < 4u; q++) {
                xv[q] = tile_a[k * T + tr + 16u * q];
                wr[q] = tile_b[k * T + tc + 16u * q];
                wi[q] = tile_c[k * T + tc + 16u * q];
            }
            for (var q = 0u; q < 4u; q++) {
                for (var v = 0u; v < 4u; v++) {
                    o.re[q * 4u + v] += xv[q] * wr[v];
                    if complex {
                        o.im[q * 4u + v] += xv[q] * wi[v];
                    }
                }
            }
        }
        workgroupBarrier();
    }
    return o;
}
