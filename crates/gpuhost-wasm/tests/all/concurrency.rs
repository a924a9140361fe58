//! Many guests at once on one runtime, sharing one device.

use crate::{assert_ok, device, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_guests_at_once_share_one_device() {
    let Some((rt, _device)) = device().await else {
        return;
    };
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            tokio::spawn(async move {
                let (name, args, want) = match i % 3 {
                    0 => (
                        "saxpy",
                        vec![(512 + i).to_string()],
                        format!("saxpy ok n={}", 512 + i),
                    ),
                    1 => (
                        "reduce",
                        vec![(2048 + i).to_string()],
                        format!("reduce ok n={}", 2048 + i),
                    ),
                    _ => (
                        "matmul",
                        vec!["17".into(), "33".into(), "20".into()],
                        "matmul ok".into(),
                    ),
                };
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                (run(rt, name, &args).await.unwrap(), want)
            })
        })
        .collect();
    for t in tasks {
        let (o, want) = t.await.unwrap();
        assert_ok(&o, &want);
    }
}
