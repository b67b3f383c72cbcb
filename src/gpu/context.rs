//! The process-wide wgpu device: created lazily on first use, one queue,
//! pipelines compiled once, helpers for buffers, dispatches and read-back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, OnceLock};

use wgpu::util::DeviceExt;

use super::{env_policy, EnvPolicy, GPU_ENV};
use crate::error::{Error, Result};

/// Threads per workgroup of every kernel (a multiple of every vendor's
/// SIMD width, and the WebGPU minimum of `max_compute_invocations_per_workgroup`).
pub(super) const WORKGROUP: u32 = 256;

/// Default cap on the bytes of one streamed chunk (inputs and outputs are
/// cut into row chunks no larger than this and the adapter's binding limit).
const DEFAULT_CHUNK_BYTES: u64 = 128 << 20;

/// Compute dispatches recorded since the process started (see [`dispatch_count`]).
static DISPATCHES: AtomicU64 = AtomicU64::new(0);

/// The user's cap on the bytes of one chunk ([`set_chunk_bytes`]).
static CHUNK_BYTES: AtomicU64 = AtomicU64::new(DEFAULT_CHUNK_BYTES);

/// The context (or why there is none) and the id of the process that
/// created it: a fork child inherits both but not the device's driver
/// threads, so it must not use the context (see [`get`]).
static CONTEXT: OnceLock<(u32, std::result::Result<Context, String>)> = OnceLock::new();

/// Number of compute dispatches randfeat_rs has recorded on the GPU in this
/// process. A call that ran on the GPU increases it; a CPU fallback does not
/// (this is how the tests prove that `device="gpu"` really used the GPU).
pub fn dispatch_count() -> u64 {
    DISPATCHES.load(Ordering::Relaxed)
}

/// Caps the bytes of one streamed chunk (default 128 MiB; the adapter's
/// `max_storage_buffer_binding_size` caps it too). Smaller chunks use less
/// device memory at the price of more transfers. Must be at least 4096.
pub fn set_chunk_bytes(bytes: u64) -> Result<()> {
    if bytes < 4096 {
        return Err(Error::invalid(
            "bytes",
            format!("the chunk size must be at least 4096 bytes, got {bytes}"),
        ));
    }
    CHUNK_BYTES.store(bytes, Ordering::Relaxed);
    Ok(())
}

/// The adapter randfeat_rs uses, as reported by wgpu.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuInfo {
    /// Adapter name, e.g. "NVIDIA H200" or "llvmpipe (LLVM 15.0.6, 256 bits)".
    pub name: String,
    /// Graphics API: "vulkan", "metal" or "dx12".
    pub backend: String,
    /// "discrete", "integrated", "virtual", "cpu" (a software rasterizer) or "other".
    pub device_type: String,
    /// Driver name and version as reported by the adapter.
    pub driver: String,
    /// True for a software rasterizer (e.g. Mesa's lavapipe).
    pub software: bool,
    /// Row length up to which the FWHT runs entirely in workgroup memory.
    pub fwht_block: usize,
    /// The device limits the kernels depend on, by their WebGPU names.
    pub limits: Vec<(&'static str, u64)>,
}

/// The adapter in use, or `None` when none is usable (no adapter, the
/// `RANDFEAT_GPU=off` override, or device creation failed).
pub fn gpu_info() -> Option<GpuInfo> {
    get().ok().map(|c| c.info.clone())
}

/// The compiled compute pipelines.
pub(super) struct Pipelines {
    pub cross_kernel: wgpu::ComputePipeline,
    pub fwht_block: wgpu::ComputePipeline,
    pub fwht_stage: wgpu::ComputePipeline,
    pub gram: wgpu::ComputePipeline,
    pub gram_exact: wgpu::ComputePipeline,
    pub gram_jobs: wgpu::ComputePipeline,
    pub local_gather: wgpu::ComputePipeline,
    pub mac_finish: wgpu::ComputePipeline,
    pub reduce: wgpu::ComputePipeline,
    pub reduce_exact: wgpu::ComputePipeline,
    pub rff: wgpu::ComputePipeline,
    pub sketch_dense: wgpu::ComputePipeline,
    pub srht_fill: wgpu::ComputePipeline,
    pub srht_gather: wgpu::ComputePipeline,
}

/// The device, its queue, the pipelines, and the first uncaptured error.
pub(super) struct Context {
    device: wgpu::Device,
    queue: wgpu::Queue,
    limits: wgpu::Limits,
    info: GpuInfo,
    pub pipelines: Pipelines,
    /// Serializes calls: the error slot and the counters are per call.
    lock: Mutex<()>,
    errors: Arc<Mutex<Option<String>>>,
}

/// The process-wide context (created on first use); an [`Error::Gpu`] when
/// no adapter is usable or `RANDFEAT_GPU=off`, or in a process forked after
/// the context was created (the device's driver state does not survive
/// fork: work submitted there would wait forever).
pub(super) fn get() -> Result<&'static Context> {
    if env_policy() == EnvPolicy::Off {
        return Err(Error::Gpu(format!(
            "no GPU adapter is available (hidden by {GPU_ENV}=off)"
        )));
    }
    let (pid, ctx) = CONTEXT.get_or_init(|| (std::process::id(), Context::create()));
    match ctx {
        Ok(_) if *pid != std::process::id() => Err(Error::Gpu(format!(
            "the GPU context was created by the parent process (pid {pid}) before this \
             process was forked from it, and a GPU device cannot be used across fork: start \
             processes that use the GPU with the 'spawn' or 'forkserver' start method of \
             multiprocessing, or use device=\"cpu\" in the forked process"
        ))),
        Ok(c) => Ok(c),
        Err(e) => Err(Error::Gpu(e.clone())),
    }
}

fn rank(t: wgpu::DeviceType) -> u8 {
    match t {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    }
}

fn type_name(t: wgpu::DeviceType) -> &'static str {
    match t {
        wgpu::DeviceType::DiscreteGpu => "discrete",
        wgpu::DeviceType::IntegratedGpu => "integrated",
        wgpu::DeviceType::VirtualGpu => "virtual",
        wgpu::DeviceType::Other => "other",
        wgpu::DeviceType::Cpu => "cpu",
    }
}

impl Context {
    fn create() -> std::result::Result<Context, String> {
        let backends = wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12;
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = backends;
        desc.flags = wgpu::InstanceFlags::empty();
        let instance = wgpu::Instance::new(desc.with_env());
        let adapters = pollster::block_on(instance.enumerate_adapters(backends));
        let adapter = adapters
            .into_iter()
            .min_by_key(|a| rank(a.get_info().device_type))
            .ok_or_else(|| {
                "no GPU adapter found (wgpu looked for Vulkan, Metal and DX12 devices; on Linux \
                 without a GPU, Mesa's software driver `mesa-vulkan-drivers` provides one)"
                    .to_string()
            })?;
        let ainfo = adapter.get_info();
        let limits = adapter.limits();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("randfeat_rs"),
            required_features: wgpu::Features::empty(),
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .map_err(|e| format!("could not open the GPU device {:?}: {e}", ainfo.name))?;
        let errors: Arc<Mutex<Option<String>>> = Arc::default();
        let slot = Arc::clone(&errors);
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut s) = slot.lock() {
                s.get_or_insert_with(|| e.to_string());
            }
        }));
        // The largest power of two of f32 that fits in workgroup memory.
        let block = 1usize
            << (limits.max_compute_workgroup_storage_size / 4)
                .max(1)
                .ilog2();
        let pipelines = Pipelines::build(&device, block);
        let info = GpuInfo {
            name: ainfo.name.clone(),
            backend: ainfo.backend.to_str().to_string(),
            device_type: type_name(ainfo.device_type).to_string(),
            driver: format!("{} {}", ainfo.driver, ainfo.driver_info)
                .trim()
                .to_string(),
            software: ainfo.device_type == wgpu::DeviceType::Cpu,
            fwht_block: block,
            limits: vec![
                ("max_buffer_size", limits.max_buffer_size),
                (
                    "max_storage_buffer_binding_size",
                    limits.max_storage_buffer_binding_size,
                ),
                (
                    "max_compute_workgroup_storage_size",
                    limits.max_compute_workgroup_storage_size.into(),
                ),
                (
                    "max_compute_invocations_per_workgroup",
                    limits.max_compute_invocations_per_workgroup.into(),
                ),
                (
                    "max_compute_workgroups_per_dimension",
                    limits.max_compute_workgroups_per_dimension.into(),
                ),
            ],
        };
        let ctx = Context {
            device,
            queue,
            limits,
            info,
            pipelines,
            lock: Mutex::new(()),
            errors,
        };
        ctx.take_error()
            .map_err(|e| format!("the GPU pipelines failed to build: {e}"))?;
        Ok(ctx)
    }

    /// True for a software rasterizer (e.g. lavapipe).
    pub fn is_software(&self) -> bool {
        self.info.software
    }

    /// Row length up to which the FWHT runs in workgroup memory.
    pub fn fwht_block(&self) -> usize {
        self.info.fwht_block
    }

    /// Holds the device for one call (calls are serialized).
    pub fn session(&self) -> Result<MutexGuard<'_, ()>> {
        let guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        // A stale error from an earlier (failed) call is not this call's.
        if let Ok(mut s) = self.errors.lock() {
            s.take();
        }
        Ok(guard)
    }

    /// The first uncaptured wgpu error since the last call, as an [`Error::Gpu`].
    pub fn take_error(&self) -> Result<()> {
        match self.errors.lock().ok().and_then(|mut s| s.take()) {
            Some(e) => Err(Error::Gpu(e)),
            None => Ok(()),
        }
    }

    /// Largest number of bytes one chunk buffer may have (a multiple of 16).
    pub fn chunk_bytes(&self) -> u64 {
        let cap = CHUNK_BYTES
            .load(Ordering::Relaxed)
            .min(self.limits.max_storage_buffer_binding_size)
            .min(self.limits.max_buffer_size);
        cap & !15
    }

    /// The most f32 one binding may hold on this device.
    pub fn max_binding_floats(&self) -> usize {
        (self
            .limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
            / 4) as usize
    }

    /// The most workgroups a dispatch may have in one dimension.
    pub fn max_workgroups(&self) -> usize {
        self.limits.max_compute_workgroups_per_dimension.max(1) as usize
    }

    /// A storage buffer of `len` f32 (at least one element: wgpu rejects empty bindings).
    pub fn storage(&self, len: usize) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: (len.max(1) * 4) as u64,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        })
    }

    /// Writes `data` to the start of `buffer`.
    pub fn upload(&self, buffer: &wgpu::Buffer, data: &[f32]) {
        if !data.is_empty() {
            self.queue
                .write_buffer(buffer, 0, bytemuck::cast_slice(data));
        }
    }

    /// A uniform buffer holding `words` (the kernel's parameters).
    pub fn uniform(&self, words: &[u32]) -> wgpu::Buffer {
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: None,
                contents: bytemuck::cast_slice(words),
                usage: wgpu::BufferUsages::UNIFORM,
            })
    }

    /// A bind group of `pipeline`'s group 0 with `buffers` at bindings 0, 1, ...
    pub fn bind(
        &self,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
    ) -> wgpu::BindGroup {
        let entries: Vec<wgpu::BindGroupEntry<'_>> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: b.as_entire_binding(),
            })
            .collect();
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        })
    }

    /// A new command encoder.
    pub fn encoder(&self) -> wgpu::CommandEncoder {
        self.device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
    }

    /// Records one dispatch of `count` workgroups (a flat count, folded into
    /// a 2-D grid within `max_compute_workgroups_per_dimension`; the shaders
    /// unfold it with `num_workgroups`) times `z` in the third dimension.
    pub fn dispatch(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        pipeline: &wgpu::ComputePipeline,
        bind: &wgpu::BindGroup,
        count: u64,
        z: u32,
    ) -> Result<()> {
        if count == 0 || z == 0 {
            return Ok(());
        }
        let max = u64::from(self.limits.max_compute_workgroups_per_dimension.max(1));
        let x = count.min(max);
        let y = count.div_ceil(x);
        if y > max || u64::from(z) > max {
            return Err(Error::Gpu(format!(
                "a dispatch of {count} x {z} workgroups exceeds the device limit of {max} per dimension"
            )));
        }
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, bind, &[]);
        pass.dispatch_workgroups(x as u32, y as u32, z);
        DISPATCHES.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Submits `encoder` after copying the first `len` f32 of `src` to a
    /// staging buffer, waits, and hands the values to `f`.
    pub fn read<R>(
        &self,
        encoder: wgpu::CommandEncoder,
        src: &wgpu::Buffer,
        len: usize,
        f: impl FnOnce(&[f32]) -> R,
    ) -> Result<R> {
        let pending = self.submit_read(encoder, src, len)?;
        self.finish(pending, f)
    }

    /// Submits `encoder` after copying the first `len` f32 of `src` to a
    /// staging buffer, without waiting: the caller can record and submit
    /// more work (the next chunk) before [`Context::finish`] collects this.
    pub fn submit_read(
        &self,
        mut encoder: wgpu::CommandEncoder,
        src: &wgpu::Buffer,
        len: usize,
    ) -> Result<Pending> {
        let bytes = (len.max(1) * 4) as u64;
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        encoder.copy_buffer_to_buffer(src, 0, &staging, 0, bytes);
        self.take_error()?;
        let index = self.queue.submit([encoder.finish()]);
        let (tx, rx) = mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        Ok(Pending {
            staging,
            index,
            rx,
            len,
        })
    }

    /// Waits for the submission of `pending` (only that one: later
    /// submissions keep running) and hands its values to `f`.
    pub fn finish<R>(&self, pending: Pending, f: impl FnOnce(&[f32]) -> R) -> Result<R> {
        let Pending {
            staging,
            index,
            rx,
            len,
        } = pending;
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(index),
                timeout: None,
            })
            .map_err(|e| Error::Gpu(format!("waiting for the GPU failed: {e}")))?;
        self.take_error()?;
        rx.recv()
            .map_err(|_| Error::Gpu("the GPU read-back was dropped".into()))?
            .map_err(|e| Error::Gpu(format!("mapping the GPU read-back failed: {e}")))?;
        let out = {
            let view = staging
                .get_mapped_range(..)
                .map_err(|e| Error::Gpu(format!("mapping the GPU read-back failed: {e}")))?;
            let data: &[f32] = bytemuck::cast_slice(&view);
            f(&data[..len])
        };
        staging.unmap();
        Ok(out)
    }
}

/// A submitted read-back (see [`Context::submit_read`]).
pub(super) struct Pending {
    staging: wgpu::Buffer,
    index: wgpu::SubmissionIndex,
    rx: mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
    len: usize,
}

impl Pipelines {
    fn build(device: &wgpu::Device, block: usize) -> Pipelines {
        let make = |label: &str, source: String, entry: &str| {
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(label),
                layout: None,
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            })
        };
        // Every module starts with the shared prelude; the tiled projection
        // (project.wgsl) goes into the modules that use it.
        let with_prelude = |body: &str| format!("{}\n{body}", include_str!("shaders/tile.wgsl"));
        let projected =
            |body: &str| with_prelude(&format!("{}\n{body}", include_str!("shaders/project.wgsl")));
        let fwht =
            with_prelude(include_str!("shaders/fwht.wgsl")).replace("{BLOCK}", &block.to_string());
        let gram = with_prelude(include_str!("shaders/gram.wgsl"));
        let reduce = with_prelude(include_str!("shaders/reduce.wgsl"));
        let sketch = projected(include_str!("shaders/sketch.wgsl"));
        Pipelines {
            cross_kernel: make(
                "cross_kernel",
                with_prelude(include_str!("shaders/kernel.wgsl")),
                "cross_kernel",
            ),
            fwht_block: make("fwht_block", fwht.clone(), "fwht_block"),
            fwht_stage: make("fwht_stage", fwht, "fwht_stage"),
            gram: make("gram", gram.clone(), "gram_tile"),
            gram_exact: make("gram_exact", gram.clone(), "gram_tile_exact"),
            gram_jobs: make("gram_jobs", gram, "gram_jobs"),
            local_gather: make(
                "local_gather",
                with_prelude(include_str!("shaders/localized.wgsl")),
                "local_gather",
            ),
            mac_finish: make(
                "mac_finish",
                with_prelude(include_str!("shaders/maclaurin.wgsl")),
                "mac_finish",
            ),
            reduce: make("reduce", reduce.clone(), "reduce_pairs"),
            reduce_exact: make("reduce_exact", reduce, "reduce_pairs_exact"),
            rff: make(
                "rff",
                projected(include_str!("shaders/rff.wgsl")),
                "rff_tile",
            ),
            sketch_dense: make("sketch_dense", sketch.clone(), "dense_tile"),
            srht_fill: make("srht_fill", sketch.clone(), "srht_fill"),
            srht_gather: make("srht_gather", sketch, "srht_gather"),
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use ndarray::Array2;
    use rand::distr::uniform::SampleUniform;
    use rand::{Rng, SeedableRng};

    /// A `rows x cols` array of uniform values in `[-lim, lim)` from a
    /// ChaCha8 stream seeded with `seed`: the inputs of the GPU tests.
    pub(in crate::gpu) fn random<T>(rows: usize, cols: usize, lim: T, seed: u64) -> Array2<T>
    where
        T: SampleUniform + PartialOrd + Copy + std::ops::Neg<Output = T>,
    {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        Array2::from_shape_fn((rows, cols), |_| rng.random_range(-lim..lim))
    }

    /// The context; the GPU tests need an adapter (`make test` installs
    /// Mesa's lavapipe when there is none), so its absence is a failure.
    pub(in crate::gpu) fn ctx() -> &'static Context {
        match get() {
            Ok(c) => c,
            Err(e) => panic!("the GPU tests need an adapter (make test installs lavapipe): {e}"),
        }
    }

    #[test]
    fn info_and_chunk_size() {
        let c = ctx();
        let info = gpu_info().unwrap();
        assert_eq!(info.software, c.is_software());
        assert!(info.fwht_block.is_power_of_two() && info.fwht_block >= 1024);
        assert!(info
            .limits
            .iter()
            .any(|(k, v)| *k == "max_buffer_size" && *v > 0));
        assert!(matches!(
            set_chunk_bytes(100),
            Err(Error::InvalidParameter { name: "bytes", .. })
        ));
        assert!(c.chunk_bytes().is_multiple_of(16) && c.chunk_bytes() >= 4096);
    }
}
