//! The serve benchmark's own guests (scripts/probes/serve-floor.sh): http-hello and every cut of
//! http-ladder answer what http-stamp answers with the stamp-a bundle, so the probe compares
//! requests that differ only in the work they do.

use super::{Repo, Server, guest, request, test_bundle};

#[test]
fn the_floor_and_every_ladder_step_answer_as_http_stamp_does() {
    let repo = Repo::new("bench-guests");
    repo.function("hello", &guest("http-hello"), None, "sandbox = false\n");
    repo.function(
        "ladder",
        &guest("http-ladder"),
        Some(&test_bundle("stamp-a")),
        "",
    );
    let server = Server::start(&repo.dir, &[], &[]);
    let mut paths = vec!["/hello".to_string(), "/ladder".to_string()];
    paths.extend((0..=5).map(|n| format!("/ladder?steps={n}")));
    for path in paths {
        let r = request(&server.addr, "GET", &path, b"");
        assert_eq!((r.status, r.text().as_str()), (200, "a0000000"), "{path}");
    }
}
