//! Example guest: y = a*x + y on the GPU for n elements (argv[1], default 4096), checked on the
//! CPU; prints `saxpy ok n=<n> checksum=<sum>` and exits 0, or exits 1 naming the first mismatch.

use gpuhost_guest::{DeviceBuffer, Launch, Module, Stream};

fn run(n: usize) -> gpuhost_guest::Result<Result<f64, String>> {
    let module = Module::from_ptx(include_str!("../../kernels/saxpy.ptx"))?;
    let saxpy = module.kernel("saxpy")?;
    let a = 2.5f32;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let y: Vec<f32> = (0..n).map(|i| 1.0 - i as f32).collect();
    let dx = DeviceBuffer::from_slice(&x)?;
    let dy = DeviceBuffer::from_slice(&y)?;
    let stream = Stream::create()?;
    let block = 256u32;
    Launch::new(&saxpy)
        .grid1((n as u32).div_ceil(block))
        .block1(block)
        .scalar(a)
        .buffer(&dx)
        .buffer(&dy)
        .scalar(n as u32)
        .enqueue(&stream)?;
    stream.synchronize()?;
    let got = dy.download()?;
    for i in 0..n {
        let want = a * x[i] + y[i];
        if (got[i] - want).abs() > 1e-4 * want.abs().max(1.0) {
            return Ok(Err(format!(
                "saxpy mismatch at {i}: got {} want {want}",
                got[i]
            )));
        }
    }
    Ok(Ok(got.iter().map(|v| *v as f64).sum()))
}

fn main() {
    let n = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(4096usize);
    match run(n) {
        Ok(Ok(sum)) => println!("saxpy ok n={n} checksum={sum}"),
        Ok(Err(msg)) => {
            eprintln!("{msg}");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("saxpy: gpuhost:cuda error: {e}");
            std::process::exit(2);
        }
    }
}
