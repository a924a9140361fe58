;; A wasi:http function whose start code never ends: its core module's start function loops, so
;; no Store of it ever finishes instantiating. The server must still publish it (warm Stores are
;; made before a version is published, crate gpuhost-serve's warm::prewarm, which waits at most
;; a second for them), answer its requests at the function's time limit, and give back every
;; Store slot the attempts held. Compiled by serve's red-team test (redteam.rs,
;; `a_function_whose_start_code_never_ends_is_published_within_seconds_and_its_requests_time_out`)
;; with the `wat` crate.
(component
  (import "wasi:http/types@0.2.0" (instance $types
    (export "incoming-request" (type (sub resource)))
    (export "response-outparam" (type (sub resource)))))
  (alias export $types "incoming-request" (type $request))
  (alias export $types "response-outparam" (type $response-out))
  (core module $m
    (func $forever (loop $again (br $again)))
    (start $forever)
    (func (export "handle") (param i32 i32)))
  (core instance $m (instantiate $m))
  (func $handle (param "request" (own $request)) (param "response-out" (own $response-out))
    (canon lift (core func $m "handle")))
  (instance $incoming-handler (export "handle" (func $handle)))
  (export "wasi:http/incoming-handler@0.2.0" (instance $incoming-handler)))
