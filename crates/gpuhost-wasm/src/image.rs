//! Structural checks of a guest's cubin/fatbin bytes before they reach the driver.
//! `cuModuleLoadData` takes a pointer without a length and parses the image's own header, so
//! bytes that are short or whose header points past their end would make the driver read outside
//! the guest's buffer. Only images whose headers stay inside the bytes are passed on.

use crate::bindings::WitError;

const ELF_MAGIC: [u8; 4] = *b"\x7fELF";
const FATBIN_MAGIC: u32 = 0xBA55_ED50;
const ELF64_HEADER: usize = 64;
const FATBIN_HEADER: usize = 16;
const SHDR64: u64 = 0x40;
const PHDR64: u64 = 0x38;
const SHT_NOBITS: u32 = 8;

fn u16_at(b: &[u8], at: usize) -> u64 {
    u64::from(u16::from_le_bytes([b[at], b[at + 1]]))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn table_fits(len: u64, offset: u64, count: u64, entry: u64) -> bool {
    count
        .checked_mul(entry)
        .and_then(|n| n.checked_add(offset))
        .is_some_and(|end| end <= len)
}

/// Accepts a little-endian ELF64 (cubin) whose section and program header tables lie inside
/// `bytes`, or a fatbin whose declared size does; refuses anything else as `invalid-module`.
pub fn check(bytes: &[u8]) -> Result<(), WitError> {
    let len = bytes.len() as u64;
    let bad = |why: &str| {
        Err(WitError::InvalidModule(format!(
            "the image is not a loadable cubin or fatbin: {why}"
        )))
    };
    if bytes.len() >= ELF64_HEADER && bytes[..4] == ELF_MAGIC {
        if bytes[4] != 2 || bytes[5] != 1 {
            return bad("only little-endian 64-bit ELF cubins are accepted");
        }
        let (phoff, shoff) = (u64_at(bytes, 0x20), u64_at(bytes, 0x28));
        let (phentsize, phnum) = (u16_at(bytes, 0x36), u16_at(bytes, 0x38));
        let (shentsize, shnum) = (u16_at(bytes, 0x3A), u16_at(bytes, 0x3C));
        if !table_fits(len, phoff, phnum, phentsize) || !table_fits(len, shoff, shnum, shentsize) {
            return bad("its ELF header tables point past the end of the bytes");
        }
        if (shnum > 0 && shentsize < SHDR64) || (phnum > 0 && phentsize < PHDR64) {
            return bad("its ELF header table entries are smaller than ELF64's");
        }
        // Every section and segment with file contents must lie inside the bytes too.
        for i in 0..shnum {
            let h = (shoff + i * shentsize) as usize;
            let kind = u32::from_le_bytes([bytes[h + 4], bytes[h + 5], bytes[h + 6], bytes[h + 7]]);
            if kind != SHT_NOBITS
                && !table_fits(len, u64_at(bytes, h + 0x18), 1, u64_at(bytes, h + 0x20))
            {
                return bad(&format!("section {i} points past the end of the bytes"));
            }
        }
        for i in 0..phnum {
            let h = (phoff + i * phentsize) as usize;
            if !table_fits(len, u64_at(bytes, h + 0x08), 1, u64_at(bytes, h + 0x20)) {
                return bad(&format!("segment {i} points past the end of the bytes"));
            }
        }
        return Ok(());
    }
    if bytes.len() >= FATBIN_HEADER
        && u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) == FATBIN_MAGIC
    {
        let header = u16_at(bytes, 6);
        let body = u64_at(bytes, 8);
        return match header.checked_add(body) {
            Some(end) if header >= FATBIN_HEADER as u64 && end <= len => Ok(()),
            _ => bad("its fatbin header declares more bytes than were given"),
        };
    }
    bad("it starts with neither the ELF nor the fatbin magic, or is shorter than their header")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elf(shoff: u64, shnum: u16, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        b[..4].copy_from_slice(&ELF_MAGIC);
        b[4] = 2;
        b[5] = 1;
        b[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        b[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        b[0x3C..0x3E].copy_from_slice(&shnum.to_le_bytes());
        b
    }

    #[test]
    fn short_or_unknown_bytes_are_refused() {
        assert!(check(&[0xde, 0xad, 0xbe, 0xef]).is_err());
        assert!(check(b"\x7fELF").is_err());
        assert!(check(&[0u8; 128]).is_err());
    }

    #[test]
    fn elf_whose_section_table_lies_inside_is_accepted_and_one_past_the_end_refused() {
        assert!(check(&elf(64, 2, 192)).is_ok());
        assert!(check(&elf(64, 3, 192)).is_err());
        assert!(check(&elf(u64::MAX - 8, 1, 192)).is_err());
    }

    #[test]
    fn elf_section_whose_contents_run_past_the_end_is_refused() {
        let mut b = elf(64, 1, 192);
        // Section 0 (at byte 64): PROGBITS, offset 128, size 64 fits exactly; size 65 does not.
        b[64 + 4] = 1;
        b[64 + 0x18..64 + 0x20].copy_from_slice(&128u64.to_le_bytes());
        b[64 + 0x20..64 + 0x28].copy_from_slice(&64u64.to_le_bytes());
        assert!(check(&b).is_ok());
        b[64 + 0x20..64 + 0x28].copy_from_slice(&65u64.to_le_bytes());
        assert!(check(&b).is_err());
    }

    #[test]
    fn fatbin_must_hold_its_declared_size() {
        let mut f = vec![0u8; 64];
        f[..4].copy_from_slice(&FATBIN_MAGIC.to_le_bytes());
        f[6..8].copy_from_slice(&16u16.to_le_bytes());
        f[8..16].copy_from_slice(&48u64.to_le_bytes());
        assert!(check(&f).is_ok());
        f[8..16].copy_from_slice(&49u64.to_le_bytes());
        assert!(check(&f).is_err());
    }
}
