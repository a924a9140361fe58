//! Example guest: sums n floats (argv[1], default 100000) with a shared-memory tree reduction,
//! two passes on the GPU, checked against the CPU sum; prints `reduce ok n=<n> sum=<sum>`.

use gpuhost_guest::{DeviceBuffer, Launch, Module, Stream};

const BLOCK: u32 = 256;

fn run(n: usize) -> gpuhost_guest::Result<Result<f32, String>> {
    let module = Module::from_ptx(include_str!("../../kernels/reduce.ptx"))?;
    let reduce = module.kernel("reduce_sum")?;
    // Small integers keep every partial sum exact in f32, so the check can be exact.
    let data: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let input = DeviceBuffer::from_slice(&data)?;
    let blocks = (n as u32).div_ceil(BLOCK * 2);
    let partials = DeviceBuffer::<f32>::zeroed(blocks as usize)?;
    let total = DeviceBuffer::<f32>::zeroed(1)?;
    let stream = Stream::create()?;
    Launch::new(&reduce)
        .grid1(blocks)
        .block1(BLOCK)
        .buffer(&input)
        .buffer(&partials)
        .scalar(n as u32)
        .enqueue(&stream)?;
    // The second pass sums the partials; it needs one block of BLOCK threads per 2*BLOCK partials.
    if blocks as usize > 2 * BLOCK as usize {
        return Ok(Err(format!("n={n} needs more than two passes")));
    }
    Launch::new(&reduce)
        .grid1(1)
        .block1(BLOCK)
        .buffer(&partials)
        .buffer(&total)
        .scalar(blocks)
        .enqueue(&stream)?;
    stream.synchronize()?;
    let got = total.download()?[0];
    let want: f32 = data.iter().sum();
    if got != want {
        return Ok(Err(format!("reduce mismatch: got {got} want {want}")));
    }
    Ok(Ok(got))
}

fn main() {
    let n = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000usize);
    match run(n) {
        Ok(Ok(sum)) => println!("reduce ok n={n} sum={sum}"),
        Ok(Err(msg)) => {
            eprintln!("{msg}");
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("reduce: gpuhost:cuda error: {e}");
            std::process::exit(2);
        }
    }
}
