//! Module images: finding the PTX text in what cuModuleLoadData was given. softcuda runs PTX
//! only, so a cubin (ELF), or a fatbin holding no PTX, is refused with a log that says so; a
//! fatbin's compressed PTX is expanded (fatbin_codec); text that does not start with a PTX
//! directive is not PTX at all (INVALID_IMAGE).

use std::ffi::CStr;

use cudarc::driver::sys::CUresult;

use crate::fatbin_codec;

/// A load failure: the code to return and the text for `CU_JIT_ERROR_LOG_BUFFER`.
pub(crate) type LoadError = (CUresult, String);

const ELF_MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];
const FATBIN_MAGIC: u32 = 0xBA55_ED50;
const FATBIN_WRAPPER_MAGIC: u32 = 0x4662_43B1;
const ENTRY_KIND_PTX: u16 = 1;
const ENTRY_KIND_ELF: u16 = 2;
/// Fatbin entry header fields (the layout nvcc's fatbinary writes, as documented by the open
/// readers n-eiling/cuda-fatbin-decompression and the `fatbinary` crate): kind u16 at 0, header
/// size u32 at 4, payload size u64 at 8 (padded), compressed size u32 at 16, target `sm_XX` u32
/// at 28, flags u64 at 40, decompressed size u64 at 56 (the last two confirmed on CUDA 13.0's
/// compressed fixtures).
const ENTRY_KIND_AT: usize = 0;
const ENTRY_HEADER_SIZE_AT: usize = 4;
const ENTRY_PAYLOAD_SIZE_AT: usize = 8;
const ENTRY_COMPRESSED_SIZE_AT: usize = 16;
const ENTRY_ARCH_AT: usize = 28;
const ENTRY_FLAGS_AT: usize = 40;
const ENTRY_DECOMPRESSED_SIZE_AT: usize = 56;
/// The fixed part of an entry header (PTX entries append their ptxas options after it).
const ENTRY_HEADER_MIN: usize = 64;
/// A fatbin larger than this is refused rather than trusted (its header gives the size).
const MAX_FATBIN: u64 = 1 << 30;

fn no_binary(what: &str) -> LoadError {
    (
        CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU,
        format!(
            "softcuda runs PTX only: {what}; load the module's PTX text (nvcc -ptx, or a fatbin \
             built with -gencode ...,code=compute_XX to embed PTX)"
        ),
    )
}

/// The PTX text of the image at `image`.
///
/// # Safety
/// `image` points to a NUL-terminated PTX string, an ELF cubin, a fatbin, or a fatbin wrapper,
/// as cuModuleLoadData requires.
pub(crate) unsafe fn ptx_text(image: *const u8) -> Result<String, LoadError> {
    if image.is_null() {
        return Err((
            CUresult::CUDA_ERROR_INVALID_VALUE,
            "the image pointer is NULL".into(),
        ));
    }
    // SAFETY: every valid image is at least 4 bytes (or a shorter NUL-terminated string, whose
    // bytes we read one at a time up to its NUL).
    let head = unsafe { prefix(image) };
    if head == ELF_MAGIC {
        return Err(no_binary("the image is a cubin (ELF) for a real GPU"));
    }
    let magic = u32::from_le_bytes(head);
    if magic == FATBIN_WRAPPER_MAGIC {
        // SAFETY: a wrapper is { u32 magic, u32 version, const void* data, void* filename }.
        let data = unsafe { image.add(8).cast::<*const u8>().read_unaligned() };
        // SAFETY: the wrapper's data points to a fatbin.
        return unsafe { fatbin_ptx(data) };
    }
    if magic == FATBIN_MAGIC {
        // SAFETY: the image is a fatbin.
        return unsafe { fatbin_ptx(image) };
    }
    // SAFETY: anything else must be a NUL-terminated string.
    let text = unsafe { CStr::from_ptr(image.cast()) };
    let text = text.to_str().map_err(|e| {
        (
            CUresult::CUDA_ERROR_INVALID_IMAGE,
            format!(
                "the image is neither PTX text (invalid UTF-8 at byte {}), a cubin nor a fatbin",
                e.valid_up_to()
            ),
        )
    })?;
    if !starts_with_directive(text) {
        // NVIDIA's driver answers INVALID_IMAGE (not INVALID_PTX) for text that is not PTX at all
        // (seen on an H200, driver 580); PTX that is merely broken is INVALID_PTX, from ptxvm.
        let start: String = text.trim_start().chars().take(40).collect();
        return Err((
            CUresult::CUDA_ERROR_INVALID_IMAGE,
            format!(
                "the image is neither PTX text (PTX starts with a directive such as `.version`, \
                 after any comments; this starts with {start:?}), a cubin nor a fatbin"
            ),
        ));
    }
    Ok(text.to_owned())
}

/// Whether the first token after whitespace and comments is a PTX directive (`.version`, ...):
/// the line between text that is not PTX at all and PTX with errors in it.
fn starts_with_directive(mut text: &str) -> bool {
    loop {
        text = text.trim_start();
        if let Some(rest) = text.strip_prefix("//") {
            text = rest.split_once('\n').map_or("", |(_, after)| after);
        } else if let Some(rest) = text.strip_prefix("/*") {
            match rest.split_once("*/") {
                Some((_, after)) => text = after,
                None => return false,
            }
        } else {
            return text.starts_with('.');
        }
    }
}

/// The first four bytes, stopping (zero-filled) at a NUL so a short string is not over-read
/// (none of the binary magics contains a NUL).
///
/// # Safety
/// `p` points to a NUL-terminated string or to at least four readable bytes.
unsafe fn prefix(p: *const u8) -> [u8; 4] {
    let mut out = [0u8; 4];
    for (i, slot) in out.iter_mut().enumerate() {
        // SAFETY: bytes before the first NUL (and that NUL) are readable by the contract.
        let b = unsafe { p.add(i).read() };
        *slot = b;
        if b == 0 {
            break;
        }
    }
    out
}

fn field<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    bytes.get(at..at + N)?.try_into().ok()
}

/// The text of the fatbin's first PTX entry (expanded if nvcc compressed it).
///
/// # Safety
/// `p` points to a fatbin: a 16-byte header whose `size` field tells how many bytes follow.
unsafe fn fatbin_ptx(p: *const u8) -> Result<String, LoadError> {
    if p.is_null() {
        return Err((
            CUresult::CUDA_ERROR_INVALID_IMAGE,
            "fatbin wrapper with NULL data".into(),
        ));
    }
    // SAFETY: a fatbin header is 16 bytes.
    let header = unsafe { std::slice::from_raw_parts(p, 16) };
    let bad = || {
        (
            CUresult::CUDA_ERROR_INVALID_IMAGE,
            "malformed fatbin header".to_string(),
        )
    };
    let header_size = u16::from_le_bytes(field(header, 6).ok_or_else(bad)?) as usize;
    let body_size = u64::from_le_bytes(field(header, 8).ok_or_else(bad)?);
    if body_size > MAX_FATBIN || header_size < 16 {
        return Err(bad());
    }
    // SAFETY: the header promises `header_size + body_size` readable bytes.
    let all = unsafe { std::slice::from_raw_parts(p, header_size + body_size as usize) };
    let body = &all[header_size..];
    let mut at = 0usize;
    let mut cubin_archs: Vec<u32> = Vec::new();
    while at + ENTRY_HEADER_MIN <= body.len() {
        let e = &body[at..];
        let kind = u16::from_le_bytes(field(e, ENTRY_KIND_AT).ok_or_else(bad)?);
        let entry_header = u32::from_le_bytes(field(e, ENTRY_HEADER_SIZE_AT).ok_or_else(bad)?);
        let payload = u64::from_le_bytes(field(e, ENTRY_PAYLOAD_SIZE_AT).ok_or_else(bad)?);
        let arch = u32::from_le_bytes(field(e, ENTRY_ARCH_AT).ok_or_else(bad)?);
        let flags = u64::from_le_bytes(field(e, ENTRY_FLAGS_AT).ok_or_else(bad)?);
        let (entry_header, payload) = (
            entry_header as usize,
            usize::try_from(payload).map_err(|_| bad())?,
        );
        if entry_header < ENTRY_HEADER_MIN {
            return Err(bad());
        }
        match kind {
            ENTRY_KIND_PTX => {
                let end = entry_header.checked_add(payload).ok_or_else(bad)?;
                let stored = e.get(entry_header..end).ok_or_else(bad)?;
                let expanded;
                let text = if fatbin_codec::is_compressed(flags) {
                    let packed =
                        u32::from_le_bytes(field(e, ENTRY_COMPRESSED_SIZE_AT).ok_or_else(bad)?);
                    let packed = stored.get(..usize::try_from(packed).map_err(|_| bad())?);
                    let stated =
                        u64::from_le_bytes(field(e, ENTRY_DECOMPRESSED_SIZE_AT).ok_or_else(bad)?);
                    expanded = fatbin_codec::decompress(flags, packed.ok_or_else(bad)?, stated)?;
                    &expanded[..]
                } else {
                    stored
                };
                // The text is padded with NULs to its stated size.
                let len = text.iter().position(|&b| b == 0).unwrap_or(text.len());
                return std::str::from_utf8(&text[..len])
                    .map(str::to_owned)
                    .map_err(|_| bad());
            }
            ENTRY_KIND_ELF => cubin_archs.push(arch),
            _ => {}
        }
        at = at
            .checked_add(entry_header)
            .and_then(|a| a.checked_add(payload))
            .ok_or_else(bad)?;
    }
    let archs: Vec<String> = cubin_archs.iter().map(|a| format!("sm_{a}")).collect();
    Err(no_binary(&if archs.is_empty() {
        "the fatbin holds no PTX".to_string()
    } else {
        format!(
            "the fatbin holds only cubins (SASS for {}) and no PTX",
            archs.join(", ")
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One fatbin entry of `kind` for sm_80 holding `payload`; a PTX entry's header has the 8
    /// bytes of ptxas options nvcc puts after the fixed part.
    fn entry(kind: u16, flags: u64, payload: &[u8]) -> Vec<u8> {
        let header = if kind == ENTRY_KIND_PTX { 72 } else { 64 };
        let mut entry = vec![0u8; header];
        entry[0..2].copy_from_slice(&kind.to_le_bytes());
        entry[2..4].copy_from_slice(&0x0101u16.to_le_bytes());
        entry[4..8].copy_from_slice(&(header as u32).to_le_bytes());
        let padded = payload.len().next_multiple_of(8);
        entry[8..16].copy_from_slice(&(padded as u64).to_le_bytes());
        entry[28..32].copy_from_slice(&80u32.to_le_bytes());
        entry[40..48].copy_from_slice(&(flags | 0x11).to_le_bytes());
        entry.extend_from_slice(payload);
        entry.resize(header + padded, 0);
        entry
    }

    /// A fatbin holding `entries` in order.
    fn fatbin_of(entries: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = entries.concat();
        let mut out = Vec::new();
        out.extend_from_slice(&FATBIN_MAGIC.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&16u16.to_le_bytes());
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    fn fatbin(kind: u16, flags: u64, payload: &[u8]) -> Vec<u8> {
        fatbin_of(&[entry(kind, flags, payload)])
    }

    #[test]
    fn the_ptx_entry_after_a_cubin_is_the_one_loaded() {
        let fb = fatbin_of(&[
            entry(ENTRY_KIND_ELF, 0, &[0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 9]),
            entry(ENTRY_KIND_PTX, 0, b".version 8.0\n.target sm_90\0"),
        ]);
        // SAFETY: a complete fatbin.
        let t = unsafe { ptx_text(fb.as_ptr()) }.unwrap();
        assert_eq!(t, ".version 8.0\n.target sm_90");
    }

    #[test]
    fn plain_ptx_text_is_returned_as_is() {
        // SAFETY: a NUL-terminated string.
        let t = unsafe { ptx_text(c".version 7.0".as_ptr().cast()) }.unwrap();
        assert_eq!(t, ".version 7.0");
    }

    #[test]
    fn text_not_starting_with_a_directive_is_invalid_image_but_commented_ptx_is_ptx() {
        // SAFETY: NUL-terminated strings.
        let (code, log) = unsafe { ptx_text(c"this is not PTX".as_ptr().cast()) }.unwrap_err();
        assert_eq!(code, CUresult::CUDA_ERROR_INVALID_IMAGE);
        assert!(
            log.contains("this is not PTX") && log.contains(".version"),
            "{log}"
        );
        // SAFETY: a NUL-terminated string.
        let (code, _) = unsafe { ptx_text(c"".as_ptr().cast()) }.unwrap_err();
        assert_eq!(code, CUresult::CUDA_ERROR_INVALID_IMAGE);
        let commented = c"//\n// Generated\n/* x */\n\t.version 7.0\n.target";
        // SAFETY: a NUL-terminated string.
        let t = unsafe { ptx_text(commented.as_ptr().cast()) }.unwrap();
        assert!(t.ends_with(".version 7.0\n.target"), "{t}");
    }

    #[test]
    fn cubin_is_no_binary_for_gpu_with_a_ptx_only_log() {
        let elf = [0x7f, b'E', b'L', b'F', 2, 1, 1, 0];
        // SAFETY: eight readable bytes.
        let (code, log) = unsafe { ptx_text(elf.as_ptr()) }.unwrap_err();
        assert_eq!(code, CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU);
        assert!(log.contains("PTX only"), "{log}");
    }

    #[test]
    fn fatbin_ptx_entry_is_extracted() {
        let fb = fatbin(ENTRY_KIND_PTX, 0, b".version 8.0\n.target sm_90\0");
        // SAFETY: a complete fatbin.
        let t = unsafe { ptx_text(fb.as_ptr()) }.unwrap();
        assert_eq!(t, ".version 8.0\n.target sm_90");
    }

    #[test]
    fn fatbin_without_ptx_is_no_binary_for_gpu() {
        let fb = fatbin(ENTRY_KIND_ELF, 0, &[0x7f, b'E', b'L', b'F']);
        // SAFETY: a complete fatbin.
        let (code, log) = unsafe { ptx_text(fb.as_ptr()) }.unwrap_err();
        assert_eq!(code, CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU);
        assert!(log.contains("only cubins (SASS for sm_80)"), "{log}");
    }

    #[test]
    fn a_compressed_ptx_entry_is_expanded_and_a_damaged_one_is_invalid_image() {
        let ptx = b".version 8.0\n.target sm_90\n\n\n\n\n\n// padding padding padding";
        let packed = lz4_flex::block::compress(ptx);
        let mut e = entry(ENTRY_KIND_PTX, fatbin_codec::FLAG_LZ4, &packed);
        e[ENTRY_COMPRESSED_SIZE_AT..][..4].copy_from_slice(&(packed.len() as u32).to_le_bytes());
        e[ENTRY_DECOMPRESSED_SIZE_AT..][..8].copy_from_slice(&(ptx.len() as u64).to_le_bytes());
        let fb = fatbin_of(std::slice::from_ref(&e));
        // SAFETY: a complete fatbin.
        let t = unsafe { ptx_text(fb.as_ptr()) }.unwrap();
        assert_eq!(t.as_bytes(), ptx);
        // A compressed size past the entry's payload is a malformed fatbin, not a read past it.
        e[ENTRY_COMPRESSED_SIZE_AT..][..4].copy_from_slice(&u32::MAX.to_le_bytes());
        let fb = fatbin_of(&[e]);
        // SAFETY: a complete fatbin.
        let (code, _) = unsafe { ptx_text(fb.as_ptr()) }.unwrap_err();
        assert_eq!(code, CUresult::CUDA_ERROR_INVALID_IMAGE);
    }
}
