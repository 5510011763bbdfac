//! gzip and zlib, through flate2.

use std::io::Read;

use super::{DecodeError, PIECE};
use crate::codec::chain::BytesCodec;
use crate::codec::decode::scatter::Scatter;
use crate::memory::scratch::Scratch;

pub(super) fn flate_reader(codec: BytesCodec, data: &[u8]) -> Box<dyn Read + '_> {
    match codec {
        BytesCodec::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(data)),
        _ => Box::new(flate2::bufread::ZlibDecoder::new(data)),
    }
}

pub(super) fn flate_stream(
    codec: BytesCodec,
    src: &[u8],
    sink: &mut Scatter<'_>,
) -> Result<(), DecodeError> {
    let mut reader = flate_reader(codec, src);
    let mut piece = Scratch::fitting(PIECE);
    piece.resize(PIECE, 0);
    loop {
        // Fill the piece completely (or to the end) so pieces stay element-aligned.
        let mut filled = 0;
        while filled < piece.len() {
            match reader.read(&mut piece[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(DecodeError::Corrupt(format!("{codec:?} stream: {e}"))),
            }
        }
        sink.write(&piece[..filled])?;
        if filled < piece.len() {
            return Ok(());
        }
    }
}
