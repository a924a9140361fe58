//! The lexer's tests.

use super::*;

fn kinds(s: &str) -> Vec<Tok<'_>> {
    lex(s).unwrap().iter().map(|t| t.tok.clone()).collect()
}

#[test]
fn splits_opcode_modifiers_and_registers() {
    assert_eq!(
        kinds("ld.global.f32 %f1, [%rd4+-8]; // c"),
        vec![
            Tok::Ident("ld"),
            Tok::Dot("global"),
            Tok::Dot("f32"),
            Tok::Ident("%f1"),
            Tok::Punct(','),
            Tok::Punct('['),
            Tok::Ident("%rd4"),
            Tok::Punct('+'),
            Tok::Punct('-'),
            Tok::Int(8),
            Tok::Punct(']'),
            Tok::Punct(';'),
        ]
    );
}

/// What the lexer takes in one turn (an opcode, its modifiers and registers, the next
/// line's) gets the tokens, lines and offsets one turn per token gave.
#[test]
fn a_statement_run_keeps_each_tokens_line_and_offset() {
    let text = "\tadd.s32 \t%r1, %r2,%r3;\n\tmov.u32 %r4, %tid.x;\n$L:\n\tld.f32 %f1, [%rd1];\n";
    let t = lex(text).unwrap();
    let got: Vec<(Tok<'_>, u32, u32)> = t.iter().map(|k| (k.tok.clone(), k.line, k.off)).collect();
    let want = [
        (Tok::Ident("add"), 1, 1),
        (Tok::Dot("s32"), 1, 4),
        (Tok::Ident("%r1"), 1, 10),
        (Tok::Punct(','), 1, 13),
        (Tok::Ident("%r2"), 1, 15),
        (Tok::Punct(','), 1, 18),
        (Tok::Ident("%r3"), 1, 19),
        (Tok::Punct(';'), 1, 22),
        (Tok::Ident("mov"), 2, 25),
        (Tok::Dot("u32"), 2, 28),
        (Tok::Ident("%r4"), 2, 33),
        (Tok::Punct(','), 2, 36),
        (Tok::Ident("%tid.x"), 2, 38),
        (Tok::Punct(';'), 2, 44),
        (Tok::Ident("$L"), 3, 46),
        (Tok::Punct(':'), 3, 48),
        (Tok::Ident("ld"), 4, 51),
        (Tok::Dot("f32"), 4, 53),
        (Tok::Ident("%f1"), 4, 58),
        (Tok::Punct(','), 4, 61),
        (Tok::Punct('['), 4, 63),
        (Tok::Ident("%rd1"), 4, 64),
        (Tok::Punct(']'), 4, 68),
        (Tok::Punct(';'), 4, 69),
    ];
    assert_eq!(got, want);
}

#[test]
fn numbers_in_every_base_and_float_bits() {
    assert_eq!(
        kinds("0x1F 010 0b101 7U 0f3F800000 0d3FF0000000000000 1.5"),
        vec![
            Tok::Int(31),
            Tok::Int(8),
            Tok::Int(5),
            Tok::Int(7),
            Tok::F32Bits(0x3F80_0000),
            Tok::F64Bits(1f64.to_bits()),
            Tok::F64Bits(1.5f64.to_bits()),
        ]
    );
    // Prefixes, suffixes and exponents in either case.
    for (text, tok) in [
        ("0X1fu", Tok::Int(31)),
        ("0B11", Tok::Int(3)),
        ("0F3f800000", Tok::F32Bits(0x3F80_0000)),
        ("0D3ff0000000000000", Tok::F64Bits(1f64.to_bits())),
        ("2E1", Tok::F64Bits(20f64.to_bits())),
        ("7uU", Tok::Int(7)),
        ("9999999999999999999", Tok::Int(9_999_999_999_999_999_999)),
        ("18446744073709551615", Tok::Int(u64::MAX)),
        ("0", Tok::Int(0)),
        ("007", Tok::Int(7)),
    ] {
        assert_eq!(kinds(text), vec![tok], "{text}");
    }
}

#[test]
fn float_bit_patterns_end_where_the_general_path_ends_them() {
    // What the fast path takes, and what it leaves to the general path (the same tokens).
    assert_eq!(
        kinds("0f3F800000+1"),
        vec![Tok::F32Bits(0x3F80_0000), Tok::Punct('+'), Tok::Int(1)]
    );
    assert_eq!(kinds("0f3f80000e"), vec![Tok::F32Bits(0x3F80_000E)]);
    for bad in [
        "0f3F80000E-1",
        "0f3F8000001",
        "0f3F80000G",
        "0d3FF00000000000001",
    ] {
        assert!(lex(bad).is_err(), "{bad}");
    }
}

#[test]
fn special_register_components_stay_in_the_name() {
    // Joined only when nothing but the component follows, as the parser joins them.
    let t = kinds("%tid.x %r1.xy %ntid.y:: %ctaid.z.w");
    assert_eq!(t[0], Tok::Ident("%tid.x"));
    assert_eq!(t[1..3], [Tok::Ident("%r1"), Tok::Dot("xy")]);
    assert_eq!(t[3..5], [Tok::Ident("%ntid"), Tok::Dot("y::")]);
    assert_eq!(t[5..], [Tok::Ident("%ctaid"), Tok::Dot("z"), Tok::Dot("w")]);
}

/// A text that ends in a word (no fence: every scan bounds-checked) and the same text
/// ending in a newline (fenced: unchecked scans) give the same tokens, for words of every
/// kind running to the end.
#[test]
fn fenced_and_unfenced_texts_lex_alike() {
    for text in [
        "ld.global.L2::128B.v2.f32 {%f1, %f2}, [%rd1]; // c",
        "mov.u32 %r1, %tid.x",
        "%tid.x",
        "%r1",
        "%",
        ".L2::",
        "$L__BB0_2: bra.uni $L__BB0_2",
        "a",
    ] {
        let fenced = format!("{text}\n");
        let kinds = |s: &str| format!("{:?}", lex(s).map(|t| t.toks));
        assert_eq!(kinds(text), kinds(&fenced), "{text:?}");
    }
}

/// Every prefix of a module that the fence admits lexes through the unchecked scans
/// (`lex_in::<true>`) to what the checked ones give: the same tokens or the same error.
#[test]
fn the_fenced_loop_lexes_every_prefix_as_the_checked_loop() {
    let text = ".version 8.0\n.target sm_90\n.address_size 64\n\n// .globl\tk\n\
                .visible .entry k(\n\t.param .u64 k_p0\n)\n{\n\t.reg .b32 %r<5>;\n\
                \tmov.u32 %r1, %tid.x;\n\t@!%p1 bra $L__BB0_2;\n\
                \tld.global.L2::128B.v2.f32 {%f1, %f2}, [%rd1+-8];\n\
                \tmov.b32 %f3, 0f3F800000; /* c\n */ add.s32 %r2, %r1, 0x1F;\n\
                $L__BB0_2:\n\tret;\n}\n";
    let mut fenced = 0;
    for end in 0..=text.len() {
        let Some(p) = text.get(..end) else { continue };
        let Some(&last) = p.as_bytes().last() else {
            continue;
        };
        if WORD_CHAR[usize::from(last)] || last == b'%' {
            continue;
        }
        fenced += 1;
        let show = |r: Result<Tokens<'_>, Error>| format!("{:?}", r.map(|t| t.toks));
        assert_eq!(show(lex_in::<true>(p)), show(lex_in::<false>(p)), "{p:?}");
    }
    assert!(fenced > 100, "{fenced}");
}

#[test]
fn line_end_finds_the_newline_wherever_it_lies_in_a_word_of_eight() {
    for len in 0..40 {
        for nl in 0..=len {
            let mut b = vec![b'x'; len];
            if nl < len {
                b[nl] = b'\n';
            }
            for from in 0..=len {
                let want = b[from..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(len, |p| from + p);
                assert_eq!(super::line_end(&b, from), want, "{len} {nl} {from}");
            }
        }
    }
}

#[test]
fn tracks_lines_across_block_comments() {
    let t = lex("/* a\n b */\n  mov").unwrap();
    assert_eq!((t[0].line, t.col(&t[0])), (3, 3));
}

#[test]
fn rejects_garbage_with_position() {
    match lex("mov\n  #") {
        Err(Error::Parse {
            line: 2, col: 3, ..
        }) => {}
        other => panic!("{other:?}"),
    }
    assert!(lex("/* open").is_err());
    assert!(lex("0xZZ").is_err());
}
