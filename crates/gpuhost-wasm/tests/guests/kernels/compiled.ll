; Compiler-shaped attack kernels of the red-team guest: LLVM IR compiled to PTX by llc
; (gen.sh), standing in for CUDA C compiled by clang/nvcc (pointer arithmetic, generic pointers
; from integers, atomics, a chain of non-inlined calls with local arrays).
target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()

; for (i = lo + tid; i < hi; i += step) if (p[i] == secret) { atomicAdd(hits, 1); p[i] = 0; }
define void @c_scan(i32* %p, i64 %lo, i64 %hi, i64 %step, i32 %secret, i32* %hits) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %t64 = zext i32 %tid to i64
  %start = add i64 %lo, %t64
  br label %loop
loop:
  %i = phi i64 [ %start, %entry ], [ %next, %cont ]
  %done = icmp sge i64 %i, %hi
  br i1 %done, label %exit, label %body
body:
  %a = getelementptr i32, i32* %p, i64 %i
  %v = load volatile i32, i32* %a
  %eq = icmp eq i32 %v, %secret
  br i1 %eq, label %hit, label %cont
hit:
  %old = atomicrmw add i32* %hits, i32 1 monotonic
  store volatile i32 0, i32* %a
  br label %cont
cont:
  %next = add i64 %i, %step
  br label %loop
exit:
  ret void
}

; int *q = (int *)addr; out[0] = *q; out[1] = atomicExch(q + 1, v); *q = v;
define void @c_generic(i64 %addr, i32 %v, i32* %out) {
  %q = inttoptr i64 %addr to i32*
  %x = load volatile i32, i32* %q
  store i32 %x, i32* %out
  %q1 = getelementptr i32, i32* %q, i64 1
  %old = atomicrmw xchg i32* %q1, i32 %v monotonic
  %o1 = getelementptr i32, i32* %out, i64 1
  store i32 %old, i32* %o1
  store volatile i32 %v, i32* %q
  ret void
}

; out[tid] = f0(x) = x + 0 + 1 + ... + 15, through 16 non-inlined calls, each with a local array.
define void @c_deep(i32* %out, i32 %x) {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %r = call i32 @f0(i32 %x)
  %t64 = zext i32 %tid to i64
  %o = getelementptr i32, i32* %out, i64 %t64
  store i32 %r, i32* %o
  ret void
}

define internal i32 @f0(i32 %x) #0 {
  %buf = alloca [8 x i32], align 4
  %slot = getelementptr [8 x i32], [8 x i32]* %buf, i32 0, i32 0
  store volatile i32 %x, i32* %slot
  %v = load volatile i32, i32* %slot
  %y = add i32 %v, 0
  %r = call i32 @f1(i32 %y)
  ret i32 %r
}

define internal i32 @f1(i32 %x) #0 {
  %buf = alloca [8 x i32], align 4
  %slot = getelementptr [8 x i32], [8 x i32]* %buf, i32 0, i32 1
  store volatile i32 %x, i32* %slot
  %v = load volatile i32, i32* %slot
  %y = add i32 %v, 1
  %r = call i32 @f2(i32 %y)
  ret i32 %r
}

define internal i32 @f2(i32 %x) #0 {
  %buf = alloca [8 x i32], align 4
  %slot = getelementptr [8 x i32], [8 x i32]* %buf, i32 0, i32 2
  store volatile i32 %x, i32* %slot
  %v = load volatile i32, i32* %slot
  %y = add i32 %v, 2
  %r = call i32 @f3(i32 %y)
  ret i32 %r
}

define internal i32 @f3(i32 %x) #0 {
  %buf = alloca [8 x i32], align 4
  %slot = getelementptr [8 x i32], [8 x i32]* %buf, i32 0, i32 3
  store volatile i32 %x, i32* %slot
  %v = load volatile i32, i32* %slot
  %y = add i32 %v, 3
  %r = call i32 @f4(i32 %y)
  ret i32 %r
}

define internal i32 @f4(i32 %x) #0 {
  %buf = alloca [8 x i32], align 4
  %slot = getelementptr [8 x i32], [8 x i32]* %buf, i32 0, i32 4
  store volatile i32 %x, i32* %slot
  %v = load volatile i32, i32* %slot
  %y = add i32 %v, 4
  %r = call i32 @f5(i32 %y)
  ret i32 %r
}

define internal i32 @f5(i32 %x) #0 {
  %buf = alloca [8 x i32], align 4
  %slot = getelementptr [8 x i32], [8 x i32]* %buf, i32 0, i32 5
  store volatile i32 %x, i32* %slot
  %v = load volatile i32, i32* %slot
  %y = add i32 %v, 5
  %r = call i32 @f6(i32 %y)
  ret i32 %r
}

define internal i32 @f6(i32 %x) #0 {
  %buf = alloca [8 x i32], align 4
  %slot = getelementptr [8 x i32], [8 x i32]* %buf, i32 0, i32 6
  store volatile i32 %x, i32* %slot
  %v = load volatile i32, i32* %slot
  %y = add i32 %v, 6
  %r = call i32 @f7(i32 %y)
  ret i32 %r
}

define internal i32 @f7(i32 %x) #0 {
  %buf = alloca [8 x i32], align 4
  %slot = getelementptr [8 x i32], [8 x i32]* %buf, i32 0, i32 7
  store volatile i32 %x, i32* %slot
  %v = load volatile i32, i32* %slot
  %y = add i32 %v, 7
  %r = call i32 @f8(i32 %y)
  ret i32 %r
}

define internal i32 @f8(i32 %x) #0 {
  %buf = alloca [8 x i32], align 4
  %slot = getelementptr [8 x i32], [8 x i32]* %buf, i32 0, i32 0
  store volatile i32 %x, i32* %slot
  %v = load volatile i32, i32* %slot
  %y = add i32 %v, 8
  %r = call i32 @f9(i32 %y)
  ret i32 %r
}

define internal i32 @f9(i32 %x) #0 {
  %buf = alloca [8 x i32], align 4
  %slot = getelementptr [8 x i32], [8 x i32]* %buf, i32 0, i32 1
  store volatile i32 %x, i32* %slot
  %v = load volatile i32, i32* %slot
  %y = add i32 %v, 9
  %r = call i32 @f10(i32 %y)
  ret i32 %r
}

define internal i32 @f10(i32 %x) #0 {
  %buf = alloca [8 x i32], align 4
  %slot = getelementptr [8 x i32], [8 x i32]* %buf, i32 0, i32 2
  store volatile i32 %x, i32* %slot
  %v = load volatile i32, i32* %slot
  %y = add i32 %v, 10
  %r = call i32 @f11(i32 %y)
  ret i32 %r
}

define internal i32 @f11(i32 %x) #0 {
  %buf = alloca [8 x i32], align 4
  %slot = getelementptr [8 x i32], [8 x i32]* %buf, i32 0, i32 3
  store volatile i32 %x, i32* %slot
  %v = load volatile i32, i32* %slot
  %y = add i32 %v, 11
  %r = call i32 @f12(i32 %y)
  ret i32 %r
}

define internal i32 @f12(i32 %x) #0 {
  %buf = alloca [8 x i32], align 4
  %slot = getelementptr [8 x i32], [8 x i32]* %buf, i32 0, i32 4
  store volatile i32 %x, i32* %slot
  %v = load volatile i32, i32* %slot
  %y = add i32 %v, 12
  %r = call i32 @f13(i32 %y)
  ret i32 %r
}

define internal i32 @f13(i32 %x) #0 {
  %buf = alloca [8 x i32], align 4
  %slot = getelementptr [8 x i32], [8 x i32]* %buf, i32 0, i32 5
  store volatile i32 %x, i32* %slot
  %v = load volatile i32, i32* %slot
  %y = add i32 %v, 13
  %r = call i32 @f14(i32 %y)
  ret i32 %r
}

define internal i32 @f14(i32 %x) #0 {
  %buf = alloca [8 x i32], align 4
  %slot = getelementptr [8 x i32], [8 x i32]* %buf, i32 0, i32 6
  store volatile i32 %x, i32* %slot
  %v = load volatile i32, i32* %slot
  %y = add i32 %v, 14
  %r = call i32 @f15(i32 %y)
  ret i32 %r
}

define internal i32 @f15(i32 %x) #0 {
  %buf = alloca [8 x i32], align 4
  %slot = getelementptr [8 x i32], [8 x i32]* %buf, i32 0, i32 7
  store volatile i32 %x, i32* %slot
  %v = load volatile i32, i32* %slot
  %y = add i32 %v, 15
  %r = add i32 %y, 0
  ret i32 %r
}

attributes #0 = { noinline }

!nvvm.annotations = !{!0, !1, !2}
!0 = !{void (i32*, i64, i64, i64, i32, i32*)* @c_scan, !"kernel", i32 1}
!1 = !{void (i64, i32, i32*)* @c_generic, !"kernel", i32 1}
!2 = !{void (i32*, i32)* @c_deep, !"kernel", i32 1}
