//! Unit tests of the merge: resolution, private renaming, weak/strong, errors, header.

use super::Linker;
use crate::Error;

const HEAD: &str = ".version 7.0\n.target sm_80\n.address_size 64\n";

fn link(inputs: &[(&str, &str)]) -> Result<String, Error> {
    let mut l = Linker::new();
    for (name, body) in inputs {
        let text = if body.starts_with(".version") {
            (*body).to_string()
        } else {
            format!("{HEAD}{body}")
        };
        l.add(name, &text)?;
    }
    l.link()
}

const CALLER: &str = "
.extern .func (.param .b32 r) twice(.param .b32 x);
.extern .global .align 4 .u32 bias;
.visible .entry k(.param .u64 out) {
    .reg .b32 %r<4>; .reg .b64 %rd<2>;
    ld.global.u32 %r1, [bias];
    { .param .b32 a; .param .b32 r; st.param.b32 [a], %r1;
      call (r), twice, (a); ld.param.b32 %r2, [r]; }
    ld.param.u64 %rd1, [out];
    st.global.u32 [%rd1], %r2;
    ret;
}";

const CALLEE: &str = "
.visible .global .align 4 .u32 bias = 21;
.visible .func (.param .b32 r) twice(.param .b32 x) {
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [x]; add.s32 %r2, %r1, %r1; st.param.b32 [r], %r2; ret;
}";

#[test]
fn extern_function_and_variable_resolve_to_the_other_modules_definitions() {
    let text = link(&[("a.ptx", CALLER), ("b.ptx", CALLEE)]).expect("links");
    let m = crate::Module::load(&text).expect("merged module loads");
    assert_eq!(m.kernels().len(), 1);
    assert_eq!(m.globals().len(), 1);
    assert_eq!(m.globals()[0].init, 21u32.to_le_bytes());
    assert!(!text.contains(".extern .global"), "{text}");
}

#[test]
fn an_extern_no_module_defines_is_undefined_and_names_symbol_and_module() {
    let e = link(&[("a.ptx", CALLER)]).unwrap_err();
    let Error::Undefined { symbol, input } = &e else {
        panic!("{e:?}")
    };
    assert!(symbol == "twice" || symbol == "bias", "{symbol}");
    assert_eq!(input, "a.ptx");
    assert!(e.to_string().contains("Undefined reference to"), "{e}");
}

#[test]
fn a_declared_extern_nothing_uses_needs_no_definition() {
    let text = link(&[(
        "a.ptx",
        ".extern .func unused();\n.visible .entry k() { ret; }",
    )])
    .expect("links");
    assert!(!text.contains("unused"), "{text}");
}

#[test]
fn two_strong_definitions_are_refused_when_the_second_is_added() {
    let mut l = Linker::new();
    l.add("a.ptx", &format!("{HEAD}{CALLEE}")).expect("first");
    let e = l.add("b.ptx", &format!("{HEAD}{CALLEE}")).unwrap_err();
    let Error::Conflict { input, first, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!((input.as_str(), first.as_str()), ("b.ptx", "a.ptx"));
    assert!(e.to_string().starts_with("Multiple definition of '"), "{e}");
    // The refused module was not added: the link still completes with the first.
    l.add("c.ptx", &format!("{HEAD}{CALLER}")).expect("caller");
    l.link().expect("links without the refused module");
}

#[test]
fn a_weak_definition_yields_to_a_strong_one_in_either_order() {
    let weak = ".weak .global .align 4 .u32 bias = 1;\n\
                .weak .func (.param .b32 r) twice(.param .b32 x) { st.param.b32 [r], 0; ret; }";
    for order in [[weak, CALLEE], [CALLEE, weak]] {
        let text = link(&[("a.ptx", CALLER), ("w", order[0]), ("s", order[1])]).expect("links");
        let m = crate::Module::load(&text).expect("loads");
        assert_eq!(m.globals()[0].init, 21u32.to_le_bytes(), "{text}");
        assert_eq!(text.matches(".global .align 4 .u32 bias").count(), 1);
        assert!(text.contains("add.s32"), "the strong body is kept: {text}");
    }
}

#[test]
fn same_named_privates_are_renamed_with_every_reference() {
    let a = ".global .align 4 .u32 n = 1;\n\
             .func (.param .b32 r) get() { .reg .b32 %r1; ld.global.u32 %r1, [n]; st.param.b32 [r], %r1; ret; }\n\
             .visible .entry ka(.param .u64 out) { .reg .b32 %r<2>; .reg .b64 %rd1;\n\
               { .param .b32 r; call (r), get, (); ld.param.b32 %r1, [r]; }\n\
               ld.param.u64 %rd1, [out]; st.global.u32 [%rd1], %r1; ret; }";
    let b = a.replace("n = 1", "n = 2").replace("ka(", "kb(");
    let text = link(&[("a.ptx", a), ("b.ptx", &b)]).expect("links");
    let m = crate::Module::load(&text).expect("loads");
    let inits: Vec<_> = m
        .globals()
        .iter()
        .map(|g| (g.name.clone(), g.init.clone()))
        .collect();
    assert_eq!(inits.len(), 2, "{text}");
    assert_eq!(inits[0], ("n".into(), 1u32.to_le_bytes().to_vec()));
    assert_eq!(inits[1], ("n$L1".into(), 2u32.to_le_bytes().to_vec()));
    assert!(text.contains("call (r), get$L1, ()"), "{text}");
    assert!(text.contains("[n$L1]"), "{text}");
}

#[test]
fn a_local_of_the_same_name_is_not_renamed() {
    let a = ".global .align 4 .u32 n;\n.visible .entry ka() { ret; }";
    let b = ".global .align 4 .u32 n;\n\
             .visible .entry kb() { .reg .b32 %r1; ld.global.u32 %r1, [n];\n\
               { .reg .b32 n; mov.b32 n, %r1; } ret; }";
    let text = link(&[("a.ptx", a), ("b.ptx", b)]).expect("links");
    assert!(text.contains("ld.global.u32 %r1, [n$L1]"), "{text}");
    assert!(text.contains("mov.b32 n, %r1"), "{text}");
}

#[test]
fn header_takes_the_highest_version_and_target() {
    let a = ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry ka() { ret; }";
    let b = ".version 8.5\n.target sm_90\n.address_size 64\n.visible .entry kb() { ret; }";
    let text = link(&[("a", a), ("b", b)]).expect("links");
    assert!(text.starts_with(".version 8.5\n.target sm_90\n"), "{text}");
}

#[test]
fn another_address_size_is_refused() {
    let b = ".version 7.0\n.target sm_80\n.address_size 32\n.visible .entry kb() { ret; }";
    let e = link(&[("a", ".visible .entry ka() { ret; }"), ("b", b)]).unwrap_err();
    assert!(matches!(e, Error::Incompatible { .. }), "{e:?}");
}

#[test]
fn dynamic_shared_declarations_merge_and_driver_functions_stay_extern() {
    let a = ".extern .shared .align 4 .b8 smem[];\n\
             .extern .func (.param .b32 r) vprintf(.param .b64 f, .param .b64 a);\n\
             .visible .entry ka() { ret; }";
    let b = ".extern .shared .align 16 .b8 smem[];\n.visible .entry kb() { ret; }";
    let text = link(&[("a", a), ("b", b)]).expect("links");
    assert_eq!(text.matches("smem").count(), 1, "{text}");
    assert!(text.contains(".align 16"), "{text}");
}

#[test]
fn an_input_ptxvm_cannot_lower_is_refused_when_added() {
    let e = Linker::new()
        .add(
            "bad",
            &format!("{HEAD}.visible .entry k() {{ bogus.op %r1; }}"),
        )
        .unwrap_err();
    assert!(
        matches!(e, Error::Invalid { .. } | Error::Parse { .. }),
        "{e:?}"
    );
}

#[test]
fn an_address_initialiser_is_refused_rather_than_printed_as_zero() {
    let e = Linker::new()
        .add(
            "a",
            &format!(
                "{HEAD}.visible .global .align 4 .u32 g;\n\
                 .visible .global .align 8 .u64 p[1] = {{g}};\n.visible .entry k() {{ ret; }}"
            ),
        )
        .unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e:?}");
}

#[test]
fn nvcc_string_constants_of_two_modules_stay_apart() {
    let module = |text: &str, kernel: &str| {
        let bytes: Vec<String> = text.bytes().chain([0]).map(|b| b.to_string()).collect();
        format!(
            ".global .align 1 .b8 $str[{}] = {{{}}};\n\
             .visible .entry {kernel}(.param .u64 out) {{ .reg .b64 %rd<4>;\n\
               mov.u64 %rd1, $str; cvta.global.u64 %rd2, %rd1;\n\
               ld.param.u64 %rd3, [out]; st.global.u64 [%rd3], %rd2; ret; }}",
            bytes.len(),
            bytes.join(", ")
        )
    };
    let text = link(&[("a", &module("hi", "ka")), ("b", &module("bye", "kb"))]).expect("links");
    let m = crate::Module::load(&text).expect("loads");
    let strs: Vec<_> = m
        .globals()
        .iter()
        .map(|g| (g.name.as_str(), &g.init[..]))
        .collect();
    assert_eq!(
        strs,
        [("$str", &b"hi\0"[..]), ("$str$L1", &b"bye\0"[..])],
        "{text}"
    );
    assert!(text.contains("mov.u64 %rd1, $str$L1;"), "{text}");
}

#[test]
fn of_several_common_variables_the_largest_is_the_definition() {
    let common = |n: u32, k: &str| {
        format!(".common .global .align 4 .b8 buf[{n}];\n.visible .entry {k}() {{ ret; }}")
    };
    let text = link(&[
        ("a", &common(8, "ka")),
        ("b", &common(32, "kb")),
        ("c", &common(16, "kc")),
    ])
    .expect("links");
    let m = crate::Module::load(&text).expect("loads");
    let sizes: Vec<u64> = m.globals().iter().map(|g| g.size).collect();
    assert_eq!(sizes, [32], "{text}");
}
