//! Example guest: C = A*B with a 16x16 shared-memory tiled kernel for m x k times k x n
//! (argv[1..4], default 96 80 112: not multiples of the tile, to cover the edges), checked on
//! the CPU; prints `matmul ok m=.. n=.. k=.. trace=..`.

use gpuhost_guest::{DeviceBuffer, Launch, Module, Stream};

const TILE: u32 = 16;

fn run(m: usize, n: usize, k: usize) -> gpuhost_guest::Result<Result<f32, String>> {
    let module = Module::from_ptx(include_str!("../../kernels/matmul.ptx"))?;
    let matmul = module.kernel("matmul_tiled")?;
    // Small integer entries keep every dot product exact in f32.
    let a: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 5) as f32 - 2.0).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i * 3) % 4) as f32 - 1.0).collect();
    let da = DeviceBuffer::from_slice(&a)?;
    let db = DeviceBuffer::from_slice(&b)?;
    let dc = DeviceBuffer::<f32>::zeroed(m * n)?;
    let stream = Stream::create()?;
    Launch::new(&matmul)
        .grid((n as u32).div_ceil(TILE), (m as u32).div_ceil(TILE), 1)
        .block(TILE, TILE, 1)
        .buffer(&da)
        .buffer(&db)
        .buffer(&dc)
        .scalar(m as u32)
        .scalar(n as u32)
        .scalar(k as u32)
        .enqueue(&stream)?;
    stream.synchronize()?;
    let c = dc.download()?;
    for r in 0..m {
        for col in 0..n {
            let want: f32 = (0..k).map(|j| a[r * k + j] * b[j * n + col]).sum();
            if c[r * n + col] != want {
                return Ok(Err(format!(
                    "matmul mismatch at ({r},{col}): got {} want {want}",
                    c[r * n + col]
                )));
            }
        }
    }
    Ok(Ok((0..m.min(n)).map(|i| c[i * n + i]).sum()))
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let (m, n, k) = match args[..] {
        [m, n, k] => (m, n, k),
        _ => (96, 80, 112),
    };
    match run(m, n, k) {
        Ok(Ok(trace)) => println!("matmul ok m={m} n={n} k={k} trace={trace}"),
        Ok(Err(msg)) => {
            eprintln!("{msg}");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("matmul: gpuhost:cuda error: {e}");
            std::process::exit(2);
        }
    }
}
