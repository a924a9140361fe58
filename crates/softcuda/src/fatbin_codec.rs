//! Compressed fatbin entries: nvcc compresses the PTX it embeds, and a driver that cannot undo it
//! cannot run an ordinary `nvcc` build. Two codecs are in use (seen in CUDA 13.0's own output,
//! fixtures in crates/conformance/tests/kernels): `--compress-mode=speed` writes an LZ4 block
//! (entry flag 0x2000, the format the open reader n-eiling/cuda-fatbin-decompression describes),
//! and `size`, `balance` and the default write a zstd frame (flag 0x8000). The entry header
//! states both sizes; neither is trusted beyond what the payload really yields.

use cudarc::driver::sys::CUresult;

use crate::image::LoadError;

/// Entry flag: the payload is one LZ4 block.
pub(crate) const FLAG_LZ4: u64 = 0x2000;
/// Entry flag: the payload is a zstd frame.
pub(crate) const FLAG_ZSTD: u64 = 0x8000;

/// The most a compressed entry may expand to. PTX of a whole real library fits; a header that
/// claims more is refused before anything is allocated.
const MAX_DECOMPRESSED: u64 = 256 << 20;
/// LZ4 cannot expand a block by more than 255 to 1, so a stated size beyond that is a lie.
const LZ4_MAX_RATIO: u64 = 255;

fn corrupt(what: impl std::fmt::Display) -> LoadError {
    (
        CUresult::CUDA_ERROR_INVALID_IMAGE,
        format!(
            "the fatbin's compressed PTX entry is damaged ({what}); rebuild the fatbin, or with \
             nvcc -no-compress to embed plain PTX"
        ),
    )
}

/// Whether `flags` mark a compressed entry of either codec.
pub(crate) fn is_compressed(flags: u64) -> bool {
    flags & (FLAG_LZ4 | FLAG_ZSTD) != 0
}

/// The entry's bytes as they were before nvcc compressed them: `payload` is the compressed data
/// (exactly the stated compressed size), `stated` the decompressed size from the entry header.
pub(crate) fn decompress(flags: u64, payload: &[u8], stated: u64) -> Result<Vec<u8>, LoadError> {
    if stated > MAX_DECOMPRESSED {
        return Err(corrupt(format!(
            "it claims {stated} bytes of PTX, over softcuda's limit of {MAX_DECOMPRESSED}"
        )));
    }
    // The limit above makes this conversion lossless on every supported target.
    let stated = stated as usize;
    if flags & FLAG_ZSTD != 0 {
        zstd(payload, stated)
    } else {
        lz4(payload, stated)
    }
}

fn lz4(payload: &[u8], stated: usize) -> Result<Vec<u8>, LoadError> {
    if stated as u64 > (payload.len() as u64).saturating_mul(LZ4_MAX_RATIO) {
        return Err(corrupt(format!(
            "{} compressed bytes cannot expand to the {stated} it claims",
            payload.len()
        )));
    }
    let mut out = vec![0u8; stated];
    let n = lz4_flex::block::decompress_into(payload, &mut out).map_err(corrupt)?;
    if n != stated {
        return Err(corrupt(format!(
            "it expands to {n} bytes, not the {stated} it claims"
        )));
    }
    Ok(out)
}

fn zstd(payload: &[u8], stated: usize) -> Result<Vec<u8>, LoadError> {
    use std::io::Read;
    let decoder = ruzstd::decoding::StreamingDecoder::new(payload).map_err(corrupt)?;
    let mut out = Vec::with_capacity(stated);
    // One byte past the stated size is read so that a frame longer than its header says is
    // caught rather than cut.
    decoder
        .take(stated as u64 + 1)
        .read_to_end(&mut out)
        .map_err(corrupt)?;
    if out.len() != stated {
        return Err(corrupt(format!(
            "it expands to {}{} bytes, not the {stated} it claims",
            out.len(),
            if out.len() > stated { " or more" } else { "" }
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &[u8] = b".version 8.0\n.target sm_80\n.address_size 64\n\n\n\n\n\n\n\n.version";

    #[test]
    fn an_lz4_block_expands_to_its_stated_size() {
        let packed = lz4_flex::block::compress(PTX);
        let out = decompress(FLAG_LZ4, &packed, PTX.len() as u64).unwrap();
        assert_eq!(out, PTX);
    }

    #[test]
    fn a_zstd_frame_expands_to_its_stated_size() {
        let packed =
            ruzstd::encoding::compress_to_vec(PTX, ruzstd::encoding::CompressionLevel::Fastest);
        let out = decompress(FLAG_ZSTD, &packed, PTX.len() as u64).unwrap();
        assert_eq!(out, PTX);
        let (code, _) = decompress(FLAG_ZSTD, &packed, PTX.len() as u64 - 1).unwrap_err();
        assert_eq!(code, CUresult::CUDA_ERROR_INVALID_IMAGE);
    }

    #[test]
    fn a_stated_size_the_payload_does_not_yield_is_invalid_image() {
        let packed = lz4_flex::block::compress(PTX);
        for stated in [PTX.len() as u64 - 1, PTX.len() as u64 + 1, 1 << 30] {
            let (code, log) = decompress(FLAG_LZ4, &packed, stated).unwrap_err();
            assert_eq!(code, CUresult::CUDA_ERROR_INVALID_IMAGE, "{stated}");
            assert!(
                log.contains("damaged") && log.contains("-no-compress"),
                "{log}"
            );
        }
        let (code, _) = decompress(FLAG_ZSTD, &packed, 4).unwrap_err();
        assert_eq!(code, CUresult::CUDA_ERROR_INVALID_IMAGE);
    }

    #[test]
    fn damaged_payloads_of_either_codec_are_refused_without_panicking() {
        let packed = lz4_flex::block::compress(PTX);
        for cut in 0..packed.len() {
            for flags in [FLAG_LZ4, FLAG_ZSTD] {
                let _ = decompress(flags, &packed[..cut], PTX.len() as u64);
                let mut flipped = packed.clone();
                flipped[cut] ^= 0xa5;
                let _ = decompress(flags, &flipped, PTX.len() as u64);
            }
        }
    }
}
