//! A small reader of PTX `.entry` signatures: kernel names and their parameters' sizes and
//! offsets, for drivers without cuFuncGetParamInfo and for listing a module's kernels.

use crate::launch::ParamInfo;

/// One `.entry` of a PTX module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntrySignature {
    /// The kernel's (mangled) name.
    pub name: String,
    /// Its parameters in order.
    pub params: Vec<ParamInfo>,
}

/// Read every `.entry` signature of a PTX module. Errors name the entry and the parameter text.
pub fn entries(ptx: &str) -> Result<Vec<EntrySignature>, String> {
    let text = strip_comments(ptx);
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(pos) = find_directive(rest, ".entry") {
        rest = &rest[pos + ".entry".len()..];
        let name_end = rest
            .find(['(', '{', ';'])
            .ok_or_else(|| "unterminated .entry".to_string())?;
        let name = rest[..name_end].trim().to_string();
        if name.is_empty() {
            return Err(".entry without a name".into());
        }
        let after = &rest[name_end..];
        let mut params = Vec::new();
        if after.starts_with('(') {
            let close = after
                .find(')')
                .ok_or_else(|| format!("entry {name}: unterminated parameter list"))?;
            let mut offset = 0u32;
            for decl in after[1..close].split(',') {
                let decl = decl.trim();
                if decl.is_empty() {
                    continue;
                }
                let (size, align) = param_layout(decl)
                    .map_err(|e| format!("entry {name}: parameter `{decl}`: {e}"))?;
                offset = offset.div_ceil(align) * align;
                params.push(ParamInfo { offset, size });
                offset += size;
            }
            rest = &after[close..];
        }
        out.push(EntrySignature { name, params });
    }
    Ok(out)
}

/// Find a directive as a whole word (not `.entry_x`, not inside an identifier).
fn find_directive(s: &str, directive: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = s[from..].find(directive) {
        let at = from + i;
        let next = s[at + directive.len()..].chars().next();
        if next.is_some_and(|c| c.is_whitespace()) {
            return Some(at);
        }
        from = at + directive.len();
    }
    None
}

fn strip_comments(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len());
    let mut rest = ptx;
    loop {
        let line = rest.find("//");
        let block = rest.find("/*");
        match (line, block) {
            (Some(l), b) if b.is_none_or(|b| l < b) => {
                out.push_str(&rest[..l]);
                rest = rest[l..].find('\n').map_or("", |n| &rest[l + n..]);
            }
            (_, Some(b)) => {
                out.push_str(&rest[..b]);
                rest = rest[b + 2..]
                    .find("*/")
                    .map_or("", |e| &rest[b + 2 + e + 2..]);
                out.push(' ');
            }
            _ => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

/// Size and alignment of one `.param` declaration.
fn param_layout(decl: &str) -> Result<(u32, u32), String> {
    let words: Vec<&str> = decl.split_whitespace().collect();
    if words.first() != Some(&".param") {
        return Err("expected `.param`".into());
    }
    let mut elem: Option<u32> = None;
    let mut align: Option<u32> = None;
    let mut i = 1;
    let mut name = "";
    while i < words.len() {
        let w = words[i];
        match w {
            ".align" => {
                let v = words.get(i + 1).ok_or("`.align` without a value")?;
                align = Some(v.parse().map_err(|_| format!("bad alignment `{v}`"))?);
                i += 1;
            }
            ".ptr" | ".global" | ".shared" | ".const" | ".local" => {}
            _ if w.starts_with('.') => elem = Some(type_size(w)?),
            _ => name = w,
        }
        i += 1;
    }
    let elem = elem.ok_or("no type")?;
    let count = match (name.find('['), name.find(']')) {
        (Some(a), Some(b)) if b > a => name[a + 1..b]
            .trim()
            .parse::<u32>()
            .map_err(|_| format!("bad array length in `{name}`"))?,
        _ => 1,
    };
    let align = align.unwrap_or(elem).max(1);
    if !align.is_power_of_two() {
        return Err(format!("alignment {align} is not a power of two"));
    }
    Ok((elem * count, align))
}

fn type_size(t: &str) -> Result<u32, String> {
    Ok(match t {
        ".u8" | ".s8" | ".b8" | ".pred" => 1,
        ".u16" | ".s16" | ".b16" | ".f16" | ".bf16" => 2,
        ".u32" | ".s32" | ".b32" | ".f32" | ".f16x2" | ".bf16x2" => 4,
        ".u64" | ".s64" | ".b64" | ".f64" => 8,
        _ => return Err(format!("unknown parameter type `{t}`")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = r#"
.version 7.0
.target sm_80
.address_size 64
// .entry commented_out(.param .u32 x)
.visible .entry _Z5stampPjj(
	.param .u64 _Z5stampPjj_param_0,   /* out */
	.param .u32 _Z5stampPjj_param_1
)
{ ret; }
.visible .entry mixed(
	.param .u8 a,
	.param .f64 b,
	.param .align 16 .b8 s[24],
	.param .u32 .ptr .global .align 4 p,
	.param .u16 c
)
{ ret; }
.entry noparams
{ ret; }
"#;

    #[test]
    fn reads_names_sizes_and_aligned_offsets() {
        let e = entries(PTX).unwrap();
        let names: Vec<_> = e.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["_Z5stampPjj", "mixed", "noparams"]);
        let p = |o, s| ParamInfo { offset: o, size: s };
        assert_eq!(e[0].params, [p(0, 8), p(8, 4)]);
        // u8 at 0, f64 aligned to 8, 24-byte struct aligned to 16, .ptr u32 aligned 4, u16.
        assert_eq!(
            e[1].params,
            [p(0, 1), p(8, 8), p(16, 24), p(40, 4), p(44, 2)]
        );
        assert!(e[2].params.is_empty());
    }

    #[test]
    fn unknown_types_are_errors_naming_the_entry() {
        let err = entries(".entry k(.param .q99 x) {}").unwrap_err();
        assert!(err.contains("entry k") && err.contains(".q99"), "{err}");
    }

    #[test]
    fn directive_match_needs_a_word_boundary() {
        assert!(entries(".func f() { } // no entries").unwrap().is_empty());
    }
}
