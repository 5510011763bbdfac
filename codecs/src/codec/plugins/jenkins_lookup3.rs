//! Bob Jenkins' lookup3 hash (`hashlittle`, 32-bit result), the checksum of numcodecs'
//! `jenkins_lookup3` codec (framed in `checksum32.rs`).
//!
//! Spec: <http://burtleburtle.net/bob/c/lookup3.c>, as HDF5's `H5_checksum_lookup3` (which
//! numcodecs follows) computes it: bytes taken 12 at a time as three little-endian words,
//! mixed, and the last 1-12 bytes (zero-padded) run through the final mix; an empty input
//! returns the seed state unmixed.

/// The 3-word state after absorbing one block.
fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

/// The final avalanche of the last block into `c`.
fn finish(mut a: u32, mut b: u32, mut c: u32) -> u32 {
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(14));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(11));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(25));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(16));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(4));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(14));
    c ^= b;
    c.wrapping_sub(b.rotate_left(24))
}

/// Little-endian word `i` of a 12-byte block.
fn word(block: &[u8; 12], i: usize) -> u32 {
    u32::from_le_bytes([
        block[4 * i],
        block[4 * i + 1],
        block[4 * i + 2],
        block[4 * i + 3],
    ])
}

/// lookup3 of `data` from seed `initval`. The length enters the seed as a u32 (wrapping, as
/// the C code's cast does).
#[must_use]
pub fn lookup3(data: &[u8], initval: u32) -> u32 {
    let seed = 0xdead_beef_u32
        .wrapping_add(data.len() as u32)
        .wrapping_add(initval);
    let (mut a, mut b, mut c) = (seed, seed, seed);
    if data.is_empty() {
        return c;
    }
    // Every block but the last (which holds 1-12 bytes) is mixed.
    let last_start = (data.len() - 1) / 12 * 12;
    for chunk in data[..last_start].chunks_exact(12) {
        let block: &[u8; 12] = chunk.try_into().expect("chunks_exact(12)");
        a = a.wrapping_add(word(block, 0));
        b = b.wrapping_add(word(block, 1));
        c = c.wrapping_add(word(block, 2));
        mix(&mut a, &mut b, &mut c);
    }
    let mut block = [0u8; 12];
    let tail = &data[last_start..];
    block[..tail.len()].copy_from_slice(tail);
    a = a.wrapping_add(word(&block, 0));
    b = b.wrapping_add(word(&block, 1));
    c = c.wrapping_add(word(&block, 2));
    finish(a, b, c)
}

#[cfg(test)]
mod tests {
    use super::lookup3;

    #[test]
    fn matches_numcodecs() {
        // numcodecs.jenkins.jenkins_lookup3(np.frombuffer(d, "u1"), initval) for these d
        assert_eq!(lookup3(b"", 0), 3_735_928_559);
        assert_eq!(lookup3(b"", 7), 3_735_928_566);
        assert_eq!(lookup3(b"a", 0), 1_490_454_280);
        assert_eq!(lookup3(b"a", 7), 3_410_928_457);
        assert_eq!(lookup3(b"abcdefghijkl", 0), 1_074_985_083);
        assert_eq!(lookup3(b"abcdefghijkl", 7), 2_154_566_824);
        assert_eq!(lookup3(b"abcdefghijklm", 0), 2_457_938_169);
        assert_eq!(lookup3(b"abcdefghijklm", 7), 4_154_586_032);
        let ramp: Vec<u8> = (0..40).collect();
        assert_eq!(lookup3(&ramp, 0), 480_225_416);
        assert_eq!(lookup3(&ramp, 7), 1_652_560_766);
    }
}
