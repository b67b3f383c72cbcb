// The kernel block of the sparse GP (docs/math/sparse_gp.rst, section
// Devices): out[r, m] = variance * kappa(rho(x_r, z_m)) for the stationary
// kernels of src/kernels.rs, f32.
//
// x is rows x d and z is n_inducing x d (row-major), both already divided by
// the length scales and centered on the same point on the host; out is
// rows x n_inducing (row-major: one row of K_fu per input row, the layout the
// Gram kernel reads). rho is the sum over dimensions of the squared
// differences (Euclidean kernels) or of their absolute values (kernel 1,
// Laplacian), so identical points are at distance exactly 0.
//
// Kernels: 0 Gaussian exp(-rho/2); 1 Laplacian exp(-rho); 2 Matern 1/2
// exp(-a), a = sqrt(rho); 3 Matern 3/2 (1 + a) exp(-a), a = sqrt(3 rho);
// 4 Matern 5/2 (1 + a + 5 rho/3) exp(-a), a = sqrt(5 rho). rho is clamped at
// 1e6 (every profile underflows there) so that an overflowing distance gives
// 0, not the Matern (1 + inf) * 0 = NaN.
//
// exp is evaluated explicitly (Cody-Waite reduction by ln 2 and the Cephes
// expf polynomial, within 2 ulp), since WGSL only bounds the built-in's error
// loosely (3 + 2|x| ulp).

struct Params {
    rows: u32,
    n_inducing: u32,
    d: u32,
    kernel: u32,
    variance: f32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> z: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// exp(t) for t <= 0 (0 below the smallest normal f32).
fn exp_neg(t: f32) -> f32 {
    if t < -87.0 {
        return 0.0;
    }
    let n = round(t * 1.44269504088896341);
    // ln 2 = C1 + C2 with C1 = 355/512: n * C1 is exact for |n| <= 126.
    let r = (t - n * 0.693359375) - n * -2.12194440e-4;
    let q = ((((1.9875691500e-4 * r + 1.3981999507e-3) * r + 8.3334519073e-3) * r
        + 4.1665795894e-2) * r + 1.6666665459e-1) * r + 5.0000001201e-1;
    return ldexp(q * r * r + r + 1.0, i32(n));
}

fn profile(kernel: u32, rho_in: f32) -> f32 {
    let rho = min(rho_in, 1e6);
    switch kernel {
        case 0u: { return exp_neg(-0.5 * rho); }
        case 1u: { return exp_neg(-rho); }
        case 2u: { return exp_neg(-sqrt(rho)); }
        case 3u: {
            let a = sqrt(3.0 * rho);
            return (1.0 + a) * exp_neg(-a);
        }
        default: {
            let a = sqrt(5.0 * rho);
            return (1.0 + a + rho * (5.0 / 3.0)) * exp_neg(-a);
        }
    }
}

@compute @workgroup_size(256)
fn cross_kernel(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let t = flat_group(wid, nwg) * 256u + lid;
    if t >= p.rows * p.n_inducing {
        return;
    }
    let r = t / p.n_inducing;
    let m = t % p.n_inducing;
    var rho = 0.0;
    for (var a = 0u; a < p.d; a++) {
        let delta = x[r * p.d + a] - z[m * p.d + a];
        if p.kernel == 1u {
            rho += abs(delta);
        } else {
            rho += delta * delta;
        }
    }
    out[t] = p.variance * profile(p.kernel, rho);
}
