//! Relocation of module `.global` and `.const` variables into the per-Store globals block: each
//! variable gets an offset in `GlobalsLayout`, its initialiser goes into the block's image, and
//! the rewriter turns every use of its name into `globals + offset`.

use super::hash::{HashMap, HashMapExt};

use super::{GlobalSlot, GlobalsLayout};
use crate::ast::{Init, Inst, Module, Operand, Space};
use crate::error::Error;
// How far into a module's globals block its initial image may reach: the same bound as one
// variable's image, since `GlobalsLayout::init` is built in host memory too, from the block's
// start to its last initialised byte.
use crate::lower::{MAX_INIT_BYTES as MAX_INIT_IMAGE, init_bytes, var_size};

/// Where each relocated variable lives: name → (offset in the block, size in bytes).
pub(crate) type Offsets<'m> = HashMap<&'m str, (u64, u64)>;

/// Refuses `i` if an operand other than the one at `address` (the access the rewriter
/// relocates; `None`: every operand) names a relocated variable: its declaration is gone from
/// the rewritten module, so the name would be left dangling (NVIDIA's JIT, and ptxvm, refuse
/// such a module at load, with an error about text the guest never wrote).
#[inline]
pub(crate) fn refuse_named_directly(
    globals: &Offsets<'_>,
    i: &Inst<'_>,
    address: Option<usize>,
) -> Result<(), Error> {
    // Asked of most instructions, of which most modules' have no variable to name.
    if globals.is_empty() {
        return Ok(());
    }
    refuse_named(globals, i, address)
}

fn refuse_named(globals: &Offsets<'_>, i: &Inst<'_>, address: Option<usize>) -> Result<(), Error> {
    fn named<'o>(globals: &Offsets<'_>, o: &'o Operand<'_>) -> Option<&'o str> {
        match o {
            Operand::Name(n) | Operand::Not(n) | Operand::Addr(Some(n), _) => {
                globals.contains_key(n.as_ref()).then_some(n.as_ref())
            }
            Operand::Pair(p) => [&p.0, &p.1]
                .into_iter()
                .find(|n| globals.contains_key(n.as_ref()))
                .map(|n| n.as_ref()),
            Operand::Vec(v) | Operand::List(v) => v.iter().find_map(|x| named(globals, x)),
            _ => None,
        }
    }
    let found = (i.operands.iter().enumerate())
        .filter(|&(k, _)| Some(k) != address)
        .find_map(|(_, o)| named(globals, o));
    match found {
        Some(n) => Err(Error::Refused {
            line: i.line,
            what: format!(
                "{} uses the .global/.const variable {n} directly; take its address with \
                 mov.u64 first",
                i.opcode
            ),
        }),
        None => Ok(()),
    }
}

/// Lays the module's `.global`/`.const` variables out in source order.
pub(crate) fn layout<'m>(m: &'m Module<'_>) -> Result<(GlobalsLayout, Offsets<'m>), Error> {
    let mut offsets = HashMap::new();
    let mut size = 0u64;
    let mut align = 16u64;
    let mut init = Vec::new();
    let mut vars = Vec::new();
    for v in &m.vars {
        match v.space {
            Space::Global | Space::Const => {}
            Space::Shared => continue,
            Space::Local | Space::Param => {
                return Err(Error::Refused {
                    line: v.line,
                    what: format!(
                        "module-scope .local/.param variable {}; declare it inside a function",
                        v.name
                    ),
                });
            }
        }
        if v.is_extern {
            return Err(Error::Refused {
                line: v.line,
                what: format!(
                    "external variable {} (sandboxed modules are not linked); define it here",
                    v.name
                ),
            });
        }
        if v.init.iter().any(|x| matches!(x, Init::Symbol)) {
            return Err(Error::Refused {
                line: v.line,
                what: format!(
                    "initialiser of {} holds an address; store the address at run time instead",
                    v.name
                ),
            });
        }
        let (bytes, a) = var_size(v)?;
        let a = u64::from(a);
        align = align.max(a);
        let off = size.div_ceil(a) * a;
        size = off
            .checked_add(bytes)
            .ok_or(Error::TooLarge { bytes: usize::MAX })?;
        let image = init_bytes(v, bytes)?;
        if !image.is_empty() {
            // The image is one run of bytes from the block's start: an initialised variable far
            // into the block would make it as long as the gap, whatever the text's length (40
            // uninitialised GiB-sized arrays before one `= 1` asked for 40 GiB of host memory,
            // which aborts the process).
            let end = off.saturating_add(image.len() as u64);
            if end > MAX_INIT_IMAGE {
                return Err(Error::Refused {
                    line: v.line,
                    what: format!(
                        "initialised variable {} ends {end} bytes into the module's globals, \
                         past the sandbox's {} MiB initial image; declare initialised variables \
                         before large uninitialised ones",
                        v.name,
                        MAX_INIT_IMAGE >> 20
                    ),
                });
            }
            let off = usize::try_from(off).map_err(|_| Error::TooLarge { bytes: usize::MAX })?;
            if init.len() < off + image.len() {
                init.resize(off + image.len(), 0);
            }
            init[off..off + image.len()].copy_from_slice(&image);
        }
        vars.push(GlobalSlot {
            name: v.name.to_string(),
            offset: off,
            size: bytes,
        });
        if offsets.insert(v.name.as_ref(), (off, bytes)).is_some() {
            return Err(Error::Invalid {
                line: v.line,
                msg: format!("variable {} declared twice", v.name),
            });
        }
    }
    let size = if size == 0 {
        0
    } else {
        size.div_ceil(align) * align
    };
    Ok((
        GlobalsLayout {
            size,
            align,
            init,
            vars,
        },
        offsets,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offsets by owned name: the parsed module is gone when the test reads them.
    type Owned = HashMap<String, (u64, u64)>;

    fn lay(src: &str) -> Result<(GlobalsLayout, Owned), Error> {
        let m = crate::parse::parse(&crate::lex::lex(src)?)?;
        let (l, o) = layout(&m)?;
        Ok((l, o.into_iter().map(|(n, v)| (n.to_string(), v)).collect()))
    }

    #[test]
    fn variables_get_aligned_offsets_and_their_initialisers() {
        let (l, o) = lay(".global .align 4 .b32 a[3] = {1, 2, 3};\n\
             .const .align 8 .f64 c = 0d3FF0000000000000;\n\
             .shared .b8 s[4];\n\
             .global .b8 z[100];")
        .unwrap();
        assert_eq!(o["a"], (0, 12));
        assert_eq!(o["c"], (16, 8));
        assert_eq!(o["z"], (24, 100));
        assert!(!o.contains_key("s"));
        assert_eq!(l.size, 128);
        assert_eq!(l.align, 16);
        assert_eq!(&l.init[..12], &[1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]);
        assert_eq!(&l.init[16..24], &1f64.to_bits().to_le_bytes());
        assert_eq!(l.init.len(), 24, "the zero tail is not materialised");
        let slots: Vec<_> = l
            .vars
            .iter()
            .map(|v| (v.name.as_str(), v.offset, v.size))
            .collect();
        assert_eq!(slots, [("a", 0, 12), ("c", 16, 8), ("z", 24, 100)]);
    }

    #[test]
    fn an_initialised_variable_far_into_the_block_is_refused_not_materialised() {
        // 40 GiB of uninitialised arrays, then one initialised word: the image would span all of
        // it. Refused, naming the variable and its line, before anything is allocated.
        let mut src: String = (0..40)
            .map(|i| format!(".global .b8 big{i}[1073741824];\n"))
            .collect();
        src.push_str(".global .align 4 .b32 t = 1;\n");
        match lay(&src) {
            Err(Error::Refused { line: 41, what }) => {
                assert!(what.contains("initialised variable t"), "{what}")
            }
            other => panic!("{:?}", other.map(|(l, _)| l.size)),
        }
        // Just inside the bound it is laid out, and the image ends at the word.
        let (l, o) = lay(".global .b8 big[67108860];\n.global .align 4 .b32 t = 7;").unwrap();
        assert_eq!(o["t"], (67_108_860, 4));
        assert_eq!(l.init.len(), 64 << 20);
        assert_eq!(&l.init[67_108_860..], &7u32.to_le_bytes());
    }

    #[test]
    fn a_huge_variable_with_a_short_initialiser_images_only_the_initialiser() {
        // A thousand 64 MiB arrays each initialised with one byte made a 64 MiB image each.
        let (l, o) = lay(".global .b8 a[67108864] = {1};\n.global .b8 b[67108864];").unwrap();
        assert_eq!(o["b"], (64 << 20, 64 << 20));
        assert_eq!(l.init, [1]);
    }

    #[test]
    fn huge_uninitialised_globals_are_sized_not_allocated() {
        let (l, _) = lay(".global .b8 big[800000000];").unwrap();
        assert_eq!(l.size, 800_000_000);
        assert!(l.init.is_empty());
    }

    #[test]
    fn address_initialisers_and_externs_are_refused() {
        let e = lay(".global .u64 a;\n.global .u64 p = a;").unwrap_err();
        assert!(matches!(e, Error::Refused { line: 2, .. }), "{e}");
        let e = lay(".extern .global .u32 x;").unwrap_err();
        assert!(matches!(e, Error::Refused { line: 1, .. }), "{e}");
    }
}
