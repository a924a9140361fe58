# Sourced by serve-floor.sh and driver-calls.sh: `floor_servers DIR` serves, from the packed
# binaries and guests in $gpu, a repository in DIR/repo with http-stamp sandboxed and trusted
# (/sandboxed, /trusted), http-hello (/hello), and http-ladder sandboxed and trusted (/ladder,
# /tladder), on 127.0.0.1:$floor_port (18291 unless set), and the native handler (`gpuhost bench
# --native-http`) on the port after it; returns once each answers (20 s at most). Sets serve_pid and native_pid and
# adds both to the array pids; `url TARGET` is a target's address (native, hello, sandboxed,
# trusted, ladderN, tladderN).
source scripts/probes/stamp-repo.sh
floor_servers() {
  local work=$1 f
  stamp_repo "$work/repo" '[serve]\nmax_concurrency = 128\n'
  mkdir -p "$work/repo/hello" && cp "$gpu/guests/http_hello.wasm" "$work/repo/hello/function.wasm" || exit 1
  printf 'route = "/hello"\nsandbox = false\n[serve]\nmax_concurrency = 128\n' > "$work/repo/hello/function.toml"
  for f in ladder tladder; do
    mkdir -p "$work/repo/$f/bundle" && cp "$gpu/guests/http_ladder.wasm" "$work/repo/$f/function.wasm" || exit 1
    cp crates/gpuhost/bundles/stamp-a/* "$work/repo/$f/bundle/"
  done
  printf 'route = "/ladder"\n[serve]\nmax_concurrency = 128\n' > "$work/repo/ladder/function.toml"
  printf 'route = "/tladder"\nsandbox = false\n[serve]\nmax_concurrency = 128\n' > "$work/repo/tladder/function.toml"
  "$gpu/bin/gpuhost" serve --repository "$work/repo" --listen 127.0.0.1:${floor_port:-18291} > "$work/serve.log" 2>&1 &
  serve_pid=$!; pids+=($serve_pid)
  "$gpu/bin/gpuhost" bench --native-http 127.0.0.1:$((${floor_port:-18291} + 1)) --bundle crates/gpuhost/bundles/stamp-a > "$work/native.log" 2>&1 &
  native_pid=$!; pids+=($native_pid)
  for _ in $(seq 200); do
    curl -sf "$(url hello)" > /dev/null && curl -sf "$(url sandboxed)" > /dev/null \
      && curl -sf "$(url native)" > /dev/null && return
    sleep 0.1
  done
}
url() {
  local serve=127.0.0.1:${floor_port:-18291} native=127.0.0.1:$((${floor_port:-18291} + 1))
  case $1 in
    native) echo "http://$native/stamp";;
    ladder*) echo "http://$serve/ladder?steps=${1#ladder}";;
    tladder*) echo "http://$serve/tladder?steps=${1#tladder}";;
    *) echo "http://$serve/$1";;
  esac
}
