//! Where data goes: the placement of one chunk's wanted part in an output buffer (offsets,
//! strides, the one C-order index loop), plans of many chunks, and the check that proves
//! their unsynchronised parallel writes disjoint and in bounds (`plan::check`).

pub mod grid;
pub mod index;
pub mod placement;
pub mod plan;
pub mod shard_order;
