//! What a request selects, in array coordinates: regions (integers and step-1 slices) and
//! picks (steps, index arrays, points, masks), parsed and checked against the array's shape.
//! Pure geometry; uses only the engine's errors.

pub mod pick;
pub mod positions;
pub mod selection;
