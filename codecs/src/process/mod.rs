//! The process the engine runs in: the one rayon pool all decoding and encoding runs on,
//! and what survives `fork` (locks a forked child may take over from its parent). Uses
//! nothing else of the engine but its errors.

pub mod fork;
pub mod interrupt;
pub mod pool;
