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
