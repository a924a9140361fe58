# Sourced by the serve probes: `stamp_repo DIR [EXTRA_TOML]` writes a serve repository in DIR
# with the http-stamp function twice, at /sandboxed and /trusted (the stamp-a bundle granted to
# both), from the packed guests in $gpu/guests. EXTRA_TOML is appended to each function.toml.
stamp_repo() {
  local f sandbox
  for f in sandboxed trusted; do
    mkdir -p "$1/$f/bundle"
    cp "$gpu/guests/http_stamp.wasm" "$1/$f/function.wasm"
    cp crates/gpuhost/bundles/stamp-a/* "$1/$f/bundle/"
    sandbox=true; [ $f = trusted ] && sandbox=false
    printf 'route = "/%s"\nsandbox = %s\n%b' $f $sandbox "${2:-}" > "$1/$f/function.toml"
  done
}

# `stamp_server PORT LOG [EXTRA_TOML]`: a stamp repository (as above, in a new temporary folder)
# served by the packed gpuhost on 127.0.0.1:PORT, its output in LOG; returns once /sandboxed
# answers (10 s at most). Sets `pid` to the server's and `work` to the folder.
stamp_server() {
  work=$(mktemp -d)
  stamp_repo "$work/repo" "${3:-}"
  "$gpu/bin/gpuhost" serve --repository "$work/repo" --listen "127.0.0.1:$1" > "$2" 2>&1 &
  pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$1/sandboxed" > /dev/null && break; sleep 0.1; done
}
