;; A wasi:http function whose nested component gives a stream's busy read end to the synchronous
;; `stream.cancel-write`, where a write end belongs. wasmtime 48.0.8 let that through: it cancelled
;; the end's transmit and marked the read end a write end. 48.0.10 traps it. The server's streaming
;; functions run on an engine with component-model async, so any function can build this.
;; Compiled by serve's red-team test (redteam.rs,
;; `a_guest_giving_a_streams_read_end_to_cancel_write_traps_and_the_server_goes_on`) with the
;; `wat` crate.
(component
  (import "wasi:http/types@0.2.0" (instance $types
    (export "incoming-request" (type (sub resource)))
    (export "response-outparam" (type (sub resource)))))
  (alias export $types "incoming-request" (type $request))
  (alias export $types "response-outparam" (type $response-out))

  ;; The attack runs in a component of its own: an async export is an async task, where the
  ;; synchronous `stream.cancel-write` may be called. The proxy world's handler is not async.
  (component $confuser
    (type $bytes (stream u8))
    (core module $memory (memory (export "memory") 1))
    (core instance $memory (instantiate $memory))
    (alias core export $memory "memory" (core memory $mem))
    (core func $new (canon stream.new $bytes))
    (core func $read (canon stream.read $bytes async (memory $mem)))
    (core func $cancel-write (canon stream.cancel-write $bytes))
    (core func $task-return (canon task.return))
    (core module $m
      (import "" "new" (func $new (result i64)))
      (import "" "read" (func $read (param i32 i32 i32) (result i32)))
      (import "" "cancel-write" (func $cancel-write (param i32) (result i32)))
      (import "" "task-return" (func $task-return))
      (func (export "run") (result i32)
        (local $read-end i32)
        ;; stream.new: the write end's index in the high half, the read end's in the low.
        (local.set $read-end (i32.wrap_i64 (call $new)))
        ;; Nothing was written: the read stays pending (BLOCKED), so the read end is busy.
        (drop (call $read (local.get $read-end) (i32.const 64) (i32.const 8)))
        ;; The read end, given where a write end belongs.
        (drop (call $cancel-write (local.get $read-end)))
        (call $task-return)
        (i32.const 0))
      (func (export "callback") (param i32 i32 i32) (result i32) (i32.const 0)))
    (core instance $m (instantiate $m
      (with "" (instance
        (export "new" (func $new))
        (export "read" (func $read))
        (export "cancel-write" (func $cancel-write))
        (export "task-return" (func $task-return))))))
    (func (export "run") async
      (canon lift (core func $m "run") async (callback (core func $m "callback")))))
  ;; The handler calls it from a sibling: a component may not call into its own child instances.
  (component $caller
    (import "request" (type $request (sub resource)))
    (import "response-out" (type $response-out (sub resource)))
    (import "run" (func $run async))
    ;; Lowered async: a synchronous task may start an async one, not block on it.
    (core func $run (canon lower (func $run) async))
    (core module $handler
      (import "" "run" (func $run (result i32)))
      (func (export "handle") (param i32 i32) (drop (call $run))))
    (core instance $handler (instantiate $handler
      (with "" (instance (export "run" (func $run))))))
    (func (export "handle") (param "request" (own $request)) (param "response-out" (own $response-out))
      (canon lift (core func $handler "handle"))))
  (instance $confuser (instantiate $confuser))
  (instance $caller (instantiate $caller
    (with "request" (type $request))
    (with "response-out" (type $response-out))
    (with "run" (func $confuser "run"))))
  (instance $incoming-handler (export "handle" (func $caller "handle")))
  (export "wasi:http/incoming-handler@0.2.0" (instance $incoming-handler)))
