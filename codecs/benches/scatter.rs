//! Placement throughput (criterion, bytes per second of output): decoded chunks scattered
//! into an output array, as every read of a chunk that is not one contiguous run of the
//! output does after decoding. No decoding and no I/O, so changes to `Scatter` show clearly.
//!
//!     cargo bench -p zarrpipe-codecs --bench scatter
//!
//! Cases, all uint16 from a decoded chunk that stays in cache:
//! - 64³ inner chunks (rows of 128 bytes) filling a 1 GiB output (512×1024², streamed, as a
//!   read-all of a sharded array) and 32 outputs of 32 MiB (256³, ordinary stores, as shards
//!   read one by one);
//! - 256³ chunks (rows of 512 bytes) filling the 1 GiB output, in 128 KiB pieces (as zstd
//!   streams them).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use zarrpipe_codecs::codec::decode::scatter::Scatter;
use zarrpipe_codecs::dtype::ByteOrder;
use zarrpipe_codecs::layout::placement::{c_strides, Placement};
use zarrpipe_codecs::memory::out::OutPtr;

const ELEM: usize = 2;
const PIECE: usize = 128 << 10;

/// A 64-byte aligned output of `shape`, as `read` gives, written once so that its pages are
/// in before the clock starts.
struct Output {
    buf: Vec<u8>,
    skip: usize,
    len: usize,
}

impl Output {
    fn new(shape: &[u64]) -> Self {
        let len = shape.iter().product::<u64>() as usize * ELEM;
        let buf = vec![1u8; len + 64];
        let skip = buf.as_ptr().align_offset(64);
        Self { buf, skip, len }
    }

    fn ptr(&mut self) -> OutPtr {
        // SAFETY: `skip + len` is within `buf`, which outlives every use below; the scatters
        // run one at a time.
        unsafe { OutPtr::new(self.buf.as_mut_ptr().add(self.skip), self.len) }
    }
}

/// Scatters one decoded `chunk`-shaped stream (fed in `piece`-byte writes) into every chunk
/// position of `out_shape`.
fn fill(out: &OutPtr, out_shape: &[u64], chunk: &[u64], stream: &[u8], piece: usize) {
    let strides = c_strides(out_shape, ELEM);
    let region: Vec<_> = out_shape.iter().map(|&d| 0..d).collect();
    let grid: Vec<u64> = out_shape.iter().zip(chunk).map(|(d, c)| d / c).collect();
    for i in 0..grid.iter().product::<u64>() {
        let (mut rest, mut origin) = (i, vec![0; 3]);
        for a in (0..3).rev() {
            origin[a] = rest % grid[a] * chunk[a];
            rest /= grid[a];
        }
        let p = Placement::new(&origin, chunk, &region, &strides, 0).expect("inside");
        let mut s = Scatter::new(out, &p, ELEM, ByteOrder::Native, None);
        for part in stream.chunks(piece) {
            s.write(part).expect("fits");
        }
        s.finish().expect("whole");
    }
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("scatter");
    let inner = [64u64; 3];
    let inner_stream: Vec<u8> = (0..64usize.pow(3) * ELEM).map(|i| i as u8).collect();
    let big_shape = [512u64, 1024, 1024];
    let mut big = Output::new(&big_shape);
    let big_out = big.ptr().streaming_if_large();
    g.throughput(Throughput::Bytes(big.len as u64));
    g.bench_function("64^3 inner chunks into 1 GiB (streamed)", |b| {
        b.iter(|| {
            fill(
                &big_out,
                &big_shape,
                &inner,
                &inner_stream,
                inner_stream.len(),
            )
        });
    });
    let chunk = [256u64; 3];
    let chunk_stream: Vec<u8> = (0..256usize.pow(3) * ELEM).map(|i| i as u8).collect();
    g.bench_function(
        "256^3 chunks in 128 KiB pieces into 1 GiB (streamed)",
        |b| {
            b.iter(|| fill(&big_out, &big_shape, &chunk, &chunk_stream, PIECE));
        },
    );
    // 32 shards of 32 MiB, each into its own output, as a loop over the shards keeping
    // every result: the outputs are not in cache when they are written.
    let shard_shape = [256u64; 3];
    let mut shards: Vec<Output> = (0..32).map(|_| Output::new(&shard_shape)).collect();
    let shard_outs: Vec<OutPtr> = shards
        .iter_mut()
        .map(|o| o.ptr().streaming_if_large())
        .collect();
    g.bench_function("64^3 inner chunks into 32 outputs of 32 MiB", |b| {
        b.iter(|| {
            for out in &shard_outs {
                fill(out, &shard_shape, &inner, &inner_stream, inner_stream.len());
            }
        });
    });
    g.finish();
}

criterion_group! {
    name = scatter;
    config = Criterion::default().sample_size(10).measurement_time(std::time::Duration::from_secs(5));
    targets = benches
}
criterion_main!(scatter);
